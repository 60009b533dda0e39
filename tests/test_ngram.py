"""N-gram models: proper distributions, score == step-by-step, closed forms, a slow reference, KenLM's numbers."""
import argparse
import json
import math
import random
from collections import Counter, defaultdict
from functools import lru_cache

import pytest
import torch

from lmcourse.lm import perplexity
from lmcourse.cli.ngram import add_cli, run_cli
from lmcourse.ngram.model import NGramLM
from lmcourse.vocab import Vocab

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "a", "big", "red", "<unk>"]
VOCAB = Vocab(WORDS + ["<eos>", "zebra"])  # 'zebra' never occurs in training
EOS = VOCAB.eos
SMOOTHINGS = ["mkn", "kn", "addk", "mle"]
MODES = ["sentence", "stream"]


def markov_lines(n_lines: int, seed: int, words=WORDS, skew: float = 3.0) -> list:
    """Lines drawn (with `seed`) from one fixed first-order Markov chain with skewed transition weights."""
    chain = random.Random(0)
    table = {w: [chain.random() ** skew for _ in words] for w in words + ["<s>"]}
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        prev, line = "<s>", []
        for _ in range(rng.randint(1, 7)):
            prev = rng.choices(words, weights=table[prev])[0]
            line.append(prev)
        lines.append(line)
    return lines


def encode(lines, vocab=VOCAB) -> torch.Tensor:
    return vocab.encode([w for line in lines for w in line + ["<eos>"]])


TRAIN_LINES = markov_lines(150, seed=1)
HELD_LINES = markov_lines(25, seed=2)
TRAIN, HELD = encode(TRAIN_LINES), encode(HELD_LINES)


def fitted(order, smoothing="mkn", mode="sentence", k=1.0, train=TRAIN):
    return NGramLM(VOCAB, order, smoothing, k=k, mode=mode).fit(train)


def step_by_step(lm, tokens, batch=3) -> torch.Tensor:
    """log p(x_t | x_<t) read off next_log_probs, one token at a time, in `batch` identical rows."""
    state, out = lm.start(batch), []
    for x in tokens:
        logp = lm.next_log_probs(state)  # (B, V)
        assert torch.equal(logp[0], logp[-1])
        out.append(logp[0, x])
        state = lm.advance(state, x.repeat(batch))
    return torch.stack(out)


# ------------------------------------------------------------------------ the interface


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [1, 2, 4])
def test_next_log_probs_sum_to_one(smoothing, mode, order):
    lm = fitted(order, smoothing, mode)
    g = torch.Generator().manual_seed(0)
    seen = lm.start(4)
    for x in HELD[:12]:
        seen = lm.advance(seen, x.repeat(4))
    unseen = torch.randint(0, len(VOCAB), (6, order - 1), generator=g)  # mostly contexts never counted
    for state in (lm.start(2), seen, unseen):
        logp = lm.next_log_probs(state)
        assert logp.shape == (state.shape[0], len(VOCAB)) and logp.dtype == torch.float64
        torch.testing.assert_close(logp.exp().sum(-1), torch.ones(state.shape[0], dtype=torch.float64))


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
@pytest.mark.parametrize("mode", MODES)
def test_score_agrees_with_next_log_probs(smoothing, mode):
    lm = fitted(3, smoothing, mode)
    tokens = HELD[:60]
    logp = lm.score(tokens)
    assert logp.shape == tokens.shape and logp.dtype == torch.float64
    torch.testing.assert_close(logp, step_by_step(lm, tokens), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("smoothing", SMOOTHINGS)
def test_batched_rows_with_different_histories(smoothing):
    lm = fitted(4, smoothing, "stream")
    streams = torch.stack([HELD[s:s + 25] for s in (0, 6, 13, 29)])  # (B, T) each row its own text
    state, out = lm.start(4), []
    for x in streams.T:  # (B,)
        out.append(lm.next_log_probs(state).gather(1, x[:, None])[:, 0])
        state = lm.advance(state, x)
    expected = torch.stack([lm.score(row) for row in streams])  # (B, T)
    torch.testing.assert_close(torch.stack(out, dim=1), expected, rtol=1e-12, atol=1e-12)


def test_stream_mode_reads_across_lines_and_sentence_mode_does_not():
    train = encode([["the", "cat"], ["a", "dog"]] * 25)
    probe = encode([["the", "cat"], ["a", "dog"]])
    stream, sentence = fitted(3, "mle", "stream", train=train), fitted(3, "mle", "sentence", train=train)
    # after "cat <eos>" the stream model has only ever seen "a"; the sentence model sees just <s>
    assert math.isclose(stream.score(probe)[3].exp().item(), 1.0)
    assert math.isclose(sentence.score(probe)[3].exp().item(), 25 / 50)


def test_advance_resets_at_eos_in_sentence_mode_and_reorder_picks_rows():
    lm = fitted(3, mode="sentence")
    state = lm.advance(lm.advance(lm.start(2), torch.tensor([0, 1])), torch.tensor([2, EOS]))
    assert torch.equal(state[1], lm.start(1)[0])
    assert state[0].tolist() == [0, 2]
    picked = lm.reorder(state, torch.tensor([1, 1, 0]))
    assert torch.equal(picked, state[[1, 1, 0]])
    streamed = fitted(3, mode="stream")
    assert streamed.advance(streamed.start(1), torch.tensor([EOS]))[0].tolist() == [EOS, EOS]


# ------------------------------------------------------------------------- closed forms


def test_mle_gives_minus_infinity_to_unseen_events():
    lm = fitted(2, "mle")
    unseen_word = VOCAB.encode([TRAIN_LINES[0][0], "zebra", "<eos>"])
    logp = lm.score(unseen_word)
    assert torch.isfinite(logp[0]) and logp[1] == -math.inf
    assert perplexity(lm, unseen_word) == math.inf
    counts = Counter(w for line in TRAIN_LINES for w in line + ["<eos>"])
    unigram = fitted(1, "mle").score(VOCAB.encode(["cat", "zebra"]))
    assert math.isclose(unigram[0].exp().item(), counts["cat"] / sum(counts.values()))
    assert unigram[1] == -math.inf


def test_add_k_bigram_sentence_mode_by_hand():
    k, V = 0.5, len(VOCAB)
    pairs, firsts = Counter(), Counter()
    for line in TRAIN_LINES:
        padded = ["<s>"] + line + ["<eos>"]
        for a, b in zip(padded, padded[1:]):
            pairs[a, b] += 1
            firsts[a] += 1
    expected = []
    for line in HELD_LINES[:8]:
        padded = ["<s>"] + line + ["<eos>"]
        expected += [math.log((pairs[a, b] + k) / (firsts[a] + k * V)) for a, b in zip(padded, padded[1:])]
    tokens = encode(HELD_LINES[:8])
    torch.testing.assert_close(fitted(2, "addk", k=k).score(tokens), torch.tensor(expected, dtype=torch.float64))


def test_add_k_trigram_stream_mode_by_hand():
    k, V = 2.0, len(VOCAB)
    stream = ["<eos>"] + [w for line in TRAIN_LINES for w in line + ["<eos>"]]
    tri, bi = Counter(zip(stream, stream[1:], stream[2:])), Counter(zip(stream, stream[1:]))
    tri_ctx, bi_ctx = Counter(zip(stream, stream[1:-1])), Counter(stream[:-1])
    held = ["<eos>"] + [w for line in HELD_LINES[:8] for w in line + ["<eos>"]]
    expected = [math.log((bi[held[0], held[1]] + k) / (bi_ctx[held[0]] + k * V))]  # only <eos> before x_0
    for a, b, c in zip(held, held[1:], held[2:]):
        expected.append(math.log((tri[a, b, c] + k) / (tri_ctx[a, b] + k * V)))
    lm = fitted(3, "addk", "stream", k=k)
    torch.testing.assert_close(lm.score(VOCAB.encode(held[1:])), torch.tensor(expected, dtype=torch.float64))


# -------------------------------------------------- Kneser-Ney against a slow reference


class ReferenceKN:
    """Interpolated (modified) Kneser-Ney written plainly with dicts, following Chen & Goodman (1998).

    Each segment is a list of strings whose first one is context only (<s>, or the <eos> before a
    stream). Top order: raw counts. Lower orders: the number of distinct words seen just left of
    the n-gram, plus one for each occurrence with nothing on its left. Recursion down to 1/V.
    """

    def __init__(self, segments, vocab_size, order, modified):
        self.V, self.order, self.modified = vocab_size, order, modified
        raw = [Counter() for _ in range(order + 1)]
        lefts = [defaultdict(set) for _ in range(order + 1)]
        edge = [Counter() for _ in range(order + 1)]
        for seg in segments:
            for n in range(1, order + 1):
                for i in range(0, len(seg) - n + 1):
                    if i + n - 1 == 0:
                        continue  # the context-only first symbol is never predicted
                    gram = tuple(seg[i:i + n])
                    raw[n][gram] += 1
                    if i == 0:
                        edge[n][gram] += 1
                    else:
                        lefts[n][gram].add(seg[i - 1])
        self.a = [None] + [raw[n] if n == order else
                           Counter({g: len(lefts[n][g]) + edge[n][g] for g in raw[n]}) for n in range(1, order + 1)]
        self.D = [None] + [self.discounts(self.a[n]) for n in range(1, order + 1)]
        self.followers = [defaultdict(list) for _ in range(order + 1)]
        for n in range(1, order + 1):
            for gram, count in self.a[n].items():
                self.followers[n][gram[:-1]].append(count)

    def discounts(self, a):
        t = [sum(1 for c in a.values() if c == j) for j in range(1, 5)]
        fallback = (0.5, 1.0, 1.5)
        if not self.modified:
            d = t[0] / (t[0] + 2 * t[1]) if t[0] > 0 and t[1] > 0 else 0.5
            return (d, d, d)
        if min(t) == 0:
            return fallback
        Y = t[0] / (t[0] + 2 * t[1])
        D = tuple(j - (j + 1) * Y * t[j] / t[j - 1] for j in (1, 2, 3))
        return D if all(0 < d < j for d, j in zip(D, (1, 2, 3))) else fallback

    def prob(self, w, h):
        n = len(h) + 1
        lower = 1.0 / self.V if n == 1 else self.prob(w, h[1:])
        counts = self.followers[n].get(h, [])
        total = sum(counts)
        if total == 0:
            return lower
        D = self.D[n]
        disc = lambda c: D[min(c, 3) - 1]  # noqa: E731
        gamma = sum(disc(c) for c in counts) / total
        c = self.a[n].get(h + (w,), 0)
        return (max(c - disc(c), 0.0) if c else 0.0) / total + gamma * lower

    def score(self, segments):
        out = []
        for seg in segments:
            for i in range(1, len(seg)):
                out.append(math.log(self.prob(seg[i], tuple(seg[max(0, i - self.order + 1):i]))))
        return torch.tensor(out, dtype=torch.float64)


def segments(lines, mode):
    if mode == "sentence":
        return [["<s>"] + line + ["<eos>"] for line in lines]
    return [["<eos>"] + [w for line in lines for w in line + ["<eos>"]]]


@pytest.mark.parametrize("smoothing", ["mkn", "kn"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_kneser_ney_matches_reference(smoothing, mode, order):
    ref = ReferenceKN(segments(TRAIN_LINES, mode), len(VOCAB), order, modified=smoothing == "mkn")
    lm = fitted(order, smoothing, mode)
    torch.testing.assert_close(lm.score(HELD), ref.score(segments(HELD_LINES, mode)), rtol=1e-10, atol=1e-12)
    assert lm.discounts == [list(d) for d in ref.D[1:]]


def test_reference_exercises_real_discounts_not_only_the_fallback():
    D = ReferenceKN(segments(TRAIN_LINES, "sentence"), len(VOCAB), 3, modified=True).D
    assert any(d != (0.5, 1.0, 1.5) for d in D[1:])


def test_kneser_ney_beats_add_k_on_held_out():
    words = [f"w{i}" for i in range(60)]
    vocab = Vocab(words + ["<eos>"])
    train, held = (encode(markov_lines(n, seed, words, skew=6.0), vocab) for n, seed in ((400, 3), (80, 4)))
    ppl = {s: perplexity(NGramLM(vocab, 3, s).fit(train), held) for s in ("mkn", "kn", "addk")}
    assert ppl["mkn"] < ppl["addk"] and ppl["kn"] < ppl["addk"]


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, error, words", [
    ({"order": 0}, ValueError, "order=0"),
    ({"order": 2.5}, ValueError, "whole number"),
    ({"k": 0.0, "smoothing": "addk"}, ValueError, "k=0.0"),
    ({"k": -1, "smoothing": "addk"}, ValueError, "> 0"),
    ({"smoothing": "witten-bell"}, ValueError, "witten-bell"),
    ({"mode": "document"}, ValueError, "document"),
])
def test_bad_arguments_say_what_to_do(kwargs, error, words):
    with pytest.raises(error, match=words):
        NGramLM(VOCAB, **{"order": 3, **kwargs})


def test_bad_text_says_what_to_do():
    with pytest.raises(ValueError, match="training text is empty"):
        NGramLM(VOCAB, 3).fit(torch.tensor([], dtype=torch.long))
    with pytest.raises(RuntimeError, match="fit"):
        NGramLM(VOCAB, 3).score(HELD)
    lm = fitted(3)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.score(torch.tensor([0, len(VOCAB)]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        NGramLM(VOCAB, 3).fit(torch.tensor([-1, 2]))
    with pytest.raises(ValueError, match="no '<eos>'"):
        NGramLM(Vocab(["a", "b"]), 2)


# ---------------------------------------------------------------------------------- CLI


def test_cli_prints_json_last(tmp_path, capsys):
    from lmcourse.corpora.data import load_corpus

    for split, lines in (("train", TRAIN_LINES), ("valid", HELD_LINES[:12]), ("test", HELD_LINES[12:])):
        (tmp_path / f"{split}.txt").write_text("".join(" ".join(line) + "\n" for line in lines))
    parser = argparse.ArgumentParser()
    add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ngram", "--data", str(tmp_path), "--order", "3", "--smoothing", "kn"])
    run_cli(args)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) >= 2 and "valid ppl" in lines[0]
    result = json.loads(lines[-1])
    corpus = load_corpus(str(tmp_path))
    lm = NGramLM(corpus.vocab, 3, "kn").fit(corpus.train)
    assert math.isclose(result["valid_ppl"], perplexity(lm, corpus.valid))
    assert math.isclose(result["test_ppl"], perplexity(lm, corpus.test))
    assert result["seconds"] > 0 and (result["order"], result["mode"], result["smoothing"]) == (3, "sentence", "kn")


# --------------------------------------------------------------------- KenLM on real data

# KenLM `lmplz -o N` (interpolated modified Kneser-Ney, no pruning) trained on train, scored with
# `query` line by line, </s> counted once a line (82,430 tokens for the PTB test set).
KENLM = {
    ("ptb", 2, "test"): 185.70, ("ptb", 3, "test"): 148.28, ("ptb", 4, "test"): 142.72,
    ("ptb", 5, "test"): 141.19, ("ptb", 5, "valid"): 148.01,
    ("wikitext-2", 5, "test"): 220.14, ("wikitext-2", 5, "valid"): 234.86,
}


@lru_cache(maxsize=1)
def real_corpus(name, folder):
    from lmcourse.corpora.data import load_corpus

    return load_corpus(name, data_dir=folder)


@pytest.mark.real_data
@pytest.mark.parametrize("name, order", [("ptb", 2), ("ptb", 3), ("ptb", 4), ("ptb", 5), ("wikitext-2", 5)])
def test_modified_kneser_ney_matches_kenlm(real_data_dir, name, order):
    corpus = real_corpus(name, real_data_dir)
    lm = NGramLM(corpus.vocab, order, "mkn", mode="sentence").fit(corpus.train)
    for split in ("valid", "test"):
        if (name, order, split) in KENLM:
            tokens = getattr(corpus, split)
            assert lm.score(tokens).shape == tokens.shape
            ppl, kenlm = perplexity(lm, tokens), KENLM[name, order, split]
            assert abs(ppl / kenlm - 1) < 0.01, f"{name} order {order} {split}: {ppl:.2f} vs KenLM {kenlm:.2f}"
