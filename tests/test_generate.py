"""Sampling and beam search, checked against tiny Markov models whose probabilities are known exactly."""
import itertools

import pytest
import torch

from lmcourse.lm import LanguageModel, check_tokens
from lmcourse.networks.generate import (
    Beam,
    beam_search,
    encode_prompt,
    generate_text,
    greedy,
    sample,
    sampling_distribution,
    text,
    top_k_filter,
    top_p_filter,
)
from lmcourse.ngram.model import NGramLM
from lmcourse.vocab import Vocab

WORDS = Vocab(["<eos>", "a", "b", "c", "d"])
CHARS = Vocab(["\n", "a", "b", " "])


class MarkovLM(LanguageModel):
    """An order-n Markov model from a table ``P[x_{t-n+1}, ..., x_{t-1}, x_t]``; the state is the last n-1 ids."""

    def __init__(self, table: torch.Tensor, vocab: Vocab):
        self.vocab, self.log_table = vocab, table.double().log()
        self.context, self.calls = table.dim() - 1, 0

    def score(self, tokens):
        tokens = check_tokens(tokens, len(self.vocab))
        padded = torch.cat([torch.full((self.context,), self.vocab.eos), tokens])
        windows = padded.unfold(0, self.context + 1, 1)  # (N, n)
        return self.log_table[tuple(windows.T)]

    def start(self, batch_size=1):
        return torch.full((batch_size, self.context), self.vocab.eos)

    def next_log_probs(self, state):
        self.calls += 1
        return self.log_table[tuple(state.T)]

    def advance(self, state, tokens):
        assert tokens.shape == (state.shape[0],), "advance takes one token per row"
        return torch.cat([state[:, 1:], tokens[:, None]], dim=1)

    def reorder(self, state, index):
        return state[index]


def random_table(seed, order=2, V=5, concentration=1.0):
    g = torch.Generator().manual_seed(seed)
    gamma = torch._standard_gamma(torch.full((V,) * order, concentration, dtype=torch.float64), generator=g)
    return gamma / gamma.sum(-1, keepdim=True)


# From <eos>, 'a' is likeliest but every continuation of 'a' is weak; 'b' is followed by 'c' with 0.9.
TRAP = torch.tensor([
    [0.02, 0.50, 0.40, 0.05, 0.03],   # after <eos>
    [0.22, 0.20, 0.19, 0.21, 0.18],   # after a
    [0.01, 0.04, 0.02, 0.90, 0.03],   # after b
    [0.30, 0.10, 0.25, 0.15, 0.20],   # after c
    [0.40, 0.05, 0.30, 0.10, 0.15],   # after d
], dtype=torch.float64)

# Every entry >= 0.05 so that pair counts in the frequency tests are large.
SMOOTH = 0.05 + 0.75 * random_table(7, concentration=3.0)


def chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's test of counts against probs: P(chi2_{k-1} >= statistic) = Q((k-1)/2, statistic/2)."""
    counts, probs = counts.double().flatten(), probs.double().flatten()
    expected = counts.sum() * probs
    statistic = ((counts - expected) ** 2 / expected).sum()
    dof = torch.tensor((probs.numel() - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(dof, statistic / 2))


def pair_counts(ids, V):
    seq = torch.tensor(ids)  # (B, 2)
    return torch.bincount(seq[:, 0] * V + seq[:, 1], minlength=V * V).reshape(V, V)


def pair_probs(table, eos=0):
    return table[eos][:, None] * table  # P(x_0, x_1) = P(x_0 | eos) P(x_1 | x_0)


def rank_of_next(table, seq, eos=0):
    """How many tokens are strictly more probable than each generated one, given its predecessor."""
    seq = torch.as_tensor(seq)  # (B, T)
    prev = torch.cat([torch.full((seq.shape[0], 1), eos), seq[:, :-1]], dim=1)
    rows = table[prev]  # (B, T, V)
    chosen = rows.gather(-1, seq[..., None])  # (B, T, 1)
    return (rows > chosen).sum(-1)  # (B, T)


def brute_force_argmax(table, length, eos=0):
    """The greedy path, one step at a time in plain Python."""
    prev, out = eos, []
    for _ in range(length):
        prev = int(table[prev].argmax())
        out.append(prev)
    return out


# ------------------------------------------------------------------------------------- greedy

def test_greedy_follows_argmax():
    model = MarkovLM(TRAP, WORDS)
    assert greedy(model, max_tokens=6) == brute_force_argmax(TRAP, 6)
    table = random_table(3)
    assert greedy(MarkovLM(table, WORDS), max_tokens=12) == brute_force_argmax(table, 12)


def test_temperature_near_zero_equals_greedy():
    model = MarkovLM(random_table(4), WORDS)
    cold = sample(model, max_tokens=15, temperature=1e-4, num_samples=8)
    assert cold == [greedy(model, max_tokens=15)] * 8


def test_greedy_stops_at_eos():
    model = MarkovLM(TRAP, WORDS)  # a then <eos>
    assert greedy(model, max_tokens=10, stop_at_eos=True) == [1, 0]
    assert greedy(model, max_tokens=10)[:2] == [1, 0] and len(greedy(model, max_tokens=10)) == 10


# ----------------------------------------------------------------------------------- sampling

def test_sample_frequencies_match_the_model():
    model = MarkovLM(SMOOTH, WORDS)
    ids = sample(model, max_tokens=2, num_samples=20000, generator=torch.Generator().manual_seed(11))
    assert chi_square_p_value(pair_counts(ids, 5), pair_probs(SMOOTH)) > 1e-4
    # the same counts are far from a wrong model (the flattened one), so the test has power
    flat = torch.softmax(SMOOTH.log() / 2, dim=-1)
    assert chi_square_p_value(pair_counts(ids, 5), pair_probs(flat)) < 1e-10


def test_temperature_two_flattens():
    model = MarkovLM(TRAP, WORDS)
    g = torch.Generator().manual_seed(5)
    warm = torch.tensor(sample(model, max_tokens=1, num_samples=20000, generator=g))[:, 0]
    hot = torch.tensor(sample(model, max_tokens=1, num_samples=20000, temperature=2.0, generator=g))[:, 0]

    def entropy(counts):
        p = counts.double() / counts.sum()
        return float(-(p[p > 0] * p[p > 0].log()).sum())

    assert entropy(torch.bincount(hot, minlength=5)) > entropy(torch.bincount(warm, minlength=5)) + 0.2
    tempered = TRAP[0] ** 0.5 / (TRAP[0] ** 0.5).sum()  # p^(1/T), renormalised
    assert chi_square_p_value(torch.bincount(hot, minlength=5), tempered) > 1e-4


def test_top_k_never_leaves_the_top_k():
    model = MarkovLM(SMOOTH, WORDS)
    ids = sample(model, max_tokens=10, num_samples=3000, top_k=2, generator=torch.Generator().manual_seed(1))
    assert (rank_of_next(SMOOTH, ids) < 2).all()
    first = torch.bincount(torch.tensor(ids)[:, 0], minlength=5)
    top2 = torch.zeros(5, dtype=torch.float64)
    keep = SMOOTH[0].topk(2).indices
    top2[keep] = SMOOTH[0][keep] / SMOOTH[0][keep].sum()
    assert chi_square_p_value(first[keep], top2[keep]) > 1e-4 and first.sum() == first[keep].sum()


def minimal_nucleus(probs, p):
    """The smallest set of most probable tokens holding mass >= p, by trying sizes one by one."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    for size in range(1, len(probs) + 1):
        if sum(probs[i] for i in order[:size]) >= p:
            return set(order[:size])
    return set(order)


@pytest.mark.parametrize("probs,p", [([0.1, 0.4, 0.2, 0.3], p) for p in (0.05, 0.35, 0.5, 0.65, 0.75, 0.95, 1.0)]
                         + [([0.125, 0.5, 0.25, 0.125], p) for p in (0.5, 0.75, 0.875)])  # mass exactly p
def test_top_p_keeps_the_minimal_nucleus(probs, p):
    logits = torch.tensor(probs, dtype=torch.float64).log()[None]  # (1, 4)
    kept = set(torch.isfinite(top_p_filter(logits, p))[0].nonzero().flatten().tolist())
    assert kept == minimal_nucleus(probs, p)
    dist = sampling_distribution(logits, top_p=p)[0]
    expected = torch.tensor([probs[i] if i in kept else 0.0 for i in range(4)], dtype=torch.float64)
    torch.testing.assert_close(dist, expected / expected.sum())


def test_top_p_sampling_stays_in_the_nucleus():
    model = MarkovLM(SMOOTH, WORDS)
    ids = torch.tensor(sample(model, max_tokens=8, num_samples=2000, top_p=0.6,
                              generator=torch.Generator().manual_seed(2)))
    prev = torch.cat([torch.zeros(ids.shape[0], 1, dtype=torch.long), ids[:, :-1]], dim=1)
    allowed = {v: minimal_nucleus(SMOOTH[v].tolist(), 0.6) for v in range(5)}
    pairs = set(zip(prev.flatten().tolist(), ids.flatten().tolist()))
    assert all(x in allowed[v] for v, x in pairs)
    assert any(len(a) > 1 for a in allowed.values())  # the filter really leaves a choice


def test_top_k_filter_keeps_exactly_k_rows_wise():
    logits = torch.randn(6, 9, generator=torch.Generator().manual_seed(0))
    out = top_k_filter(logits, 3)
    assert (torch.isfinite(out).sum(1) == 3).all()
    torch.testing.assert_close(out.max(1).values, logits.max(1).values)
    assert torch.isfinite(top_k_filter(logits, 50)).all()


def test_same_seed_same_samples():
    model = MarkovLM(SMOOTH, WORDS)
    one = sample(model, max_tokens=20, num_samples=4, generator=torch.Generator().manual_seed(9))
    two = sample(model, max_tokens=20, num_samples=4, generator=torch.Generator().manual_seed(9))
    other = sample(model, max_tokens=20, num_samples=4, generator=torch.Generator().manual_seed(10))
    assert one == two and one != other
    assert sample(model, max_tokens=20, seed=3) == sample(model, max_tokens=20, seed=3)
    assert sample(model, max_tokens=20) == sample(model, max_tokens=20)


def test_sample_stop_at_eos_cuts_each_row():
    model = MarkovLM(TRAP, WORDS)
    rows = sample(model, max_tokens=12, num_samples=200, stop_at_eos=True)
    assert any(len(r) < 12 for r in rows) and any(len(r) == 12 for r in rows)
    for r in rows:
        assert 0 not in r[:-1] and (r[-1] == 0 or len(r) == 12)
    assert sample(model, max_tokens=0, num_samples=3) == [[], [], []]


def test_sampling_stops_once_every_row_has_ended():
    table = TRAP.clone()
    table[:, 0] += 1.0  # <eos> is likely after every token
    model = MarkovLM(table / table.sum(-1, keepdim=True), WORDS)
    rows = sample(model, max_tokens=60, num_samples=100, stop_at_eos=True)
    assert all(r[-1] == 0 for r in rows)
    assert model.calls == max(len(r) for r in rows) > min(len(r) for r in rows)  # one model step per token


# -------------------------------------------------------------------------------- beam search

def all_sequences(model, length, prompt=(), stop_at_eos=False, alpha=0.0):
    """Every continuation of up to ``length`` tokens with its log-probability, best first (brute force)."""
    eos, seen, out = model.vocab.eos, set(), []
    for seq in itertools.product(range(len(model.vocab)), repeat=length):
        if stop_at_eos and eos in seq:
            seq = seq[: seq.index(eos) + 1]
        if seq in seen:
            continue
        seen.add(seq)
        logp = float(model.score(torch.tensor(list(prompt) + list(seq)))[len(prompt):].sum())
        out.append((logp / ((5 + len(seq)) / 6) ** alpha, logp, list(seq)))
    return sorted(out, key=lambda item: -item[0])


def test_beam_finds_what_greedy_misses():
    model = MarkovLM(TRAP, WORDS)
    best = all_sequences(model, 2)[0]
    assert best[2] == [2, 3]  # b c: 0.4 * 0.9
    assert greedy(model, max_tokens=2) != best[2]
    found = beam_search(model, beam_size=2, max_tokens=2, stop_at_eos=False)[0]
    assert found.ids == best[2] and found.logprob == pytest.approx(best[1], abs=1e-12)


@pytest.mark.parametrize("stop_at_eos", [False, True])
def test_beam_size_one_is_greedy(stop_at_eos):
    for seed in range(12):
        table = random_table(seed, order=3, concentration=0.5)
        model = MarkovLM(table, WORDS)
        (beam,) = beam_search(model, beam_size=1, max_tokens=8, stop_at_eos=stop_at_eos)
        assert beam.ids == greedy(model, max_tokens=8, stop_at_eos=stop_at_eos)


@pytest.mark.parametrize("stop_at_eos,alpha", [(False, 0.0), (True, 0.0), (True, 1.0)])
def test_wide_beam_is_exhaustive(stop_at_eos, alpha):
    model = MarkovLM(random_table(21, order=3), WORDS)
    prompt = [3, 1]
    truth = all_sequences(model, 3, prompt, stop_at_eos, alpha)
    found = beam_search(model, prompt, beam_size=125, max_tokens=3, length_penalty=alpha, stop_at_eos=stop_at_eos)
    assert [b.ids for b in found] == [t[2] for t in truth]
    torch.testing.assert_close(torch.tensor([b.logprob for b in found]), torch.tensor([t[1] for t in truth]))


def reference_beam(model, beam_size, max_tokens, eos, alpha=0.0):
    """Beam search in plain Python, without early stopping: the specification of beam_search."""
    live, finished = [(0.0, [])], []
    for t in range(max_tokens):
        cands = []
        for logp, seq in live:
            state = model.start(1)
            for x in seq:
                state = model.advance(state, torch.tensor([x]))
            step = model.next_log_probs(state)[0]
            cands += [(logp + float(step[x]), seq + [x]) for x in range(len(model.vocab))]
        cands = sorted(cands, key=lambda c: -c[0])[: 2 * beam_size]
        finished += [c for rank, c in enumerate(cands) if c[1][-1] == eos and rank < beam_size]
        live = [c for c in cands if c[1][-1] != eos][:beam_size]
    finished += live
    return sorted(finished, key=lambda c: -c[0] / ((5 + len(c[1])) / 6) ** alpha)[:beam_size]


@pytest.mark.parametrize("beam_size,alpha", [(1, 0.0), (3, 0.0), (4, 0.0), (3, 0.8), (4, 2.0)])
def test_beam_matches_a_plain_reference_and_its_own_scores(beam_size, alpha):
    for seed in range(10):
        model = MarkovLM(random_table(100 + seed, order=3, concentration=0.4), WORDS)
        found = beam_search(model, beam_size=beam_size, max_tokens=7, length_penalty=alpha)
        want = reference_beam(model, beam_size, 7, eos=0, alpha=alpha)
        assert [b.ids for b in found] == [w[1] for w in want]
        for b in found:  # the reported log-probability is the model's own score of those ids
            assert b.logprob == pytest.approx(float(model.score(torch.tensor(b.ids)).sum()), abs=1e-9)
        assert all(isinstance(b, Beam) for b in found)


# ----------------------------------------------------------------------------- prompts, text

def test_word_prompt_reads_line_breaks_as_eos():
    model = MarkovLM(TRAP, WORDS)
    assert encode_prompt(model, "a b\nc") == [1, 2, 0, 3]
    assert encode_prompt(model, [4, 0]) == [4, 0] and encode_prompt(model, None) == []
    assert text(model, [1, 2, 0, 3]) == "a b\nc"
    # the prompt conditions the continuation: after 'b' greedy takes 'c'
    assert greedy(model, "a b", max_tokens=1) == [3]


def test_char_prompt_and_text():
    table = random_table(8, V=4)
    model = MarkovLM(table, CHARS)
    assert encode_prompt(model, "ab a") == [1, 2, 3, 1]
    continuation, prev = [], 1  # greedy after the prompt "ba": the last char is 'a'
    for _ in range(5):
        prev = int(table[prev].argmax())
        continuation.append(prev)
    assert greedy(model, "ba", max_tokens=5) == continuation
    shown = generate_text(model, "ba", method="greedy", max_tokens=5)
    assert shown == "ba" + "".join(CHARS.itos[i] for i in continuation)
    with pytest.raises(ValueError, match="'z' is not in the vocabulary"):
        sample(model, "abz")


def test_generate_text_methods():
    model = MarkovLM(TRAP, WORDS)
    assert generate_text(model, "b", method="beam", max_tokens=1, stop_at_eos=False) == "b c"
    assert generate_text(model, "b", method="greedy", max_tokens=1) == "b c"
    assert generate_text(model, "b", max_tokens=3).startswith("b ")


@pytest.mark.parametrize("call,message", [
    (lambda m: sample(m, temperature=-0.5), "temperature must be >= 0"),
    (lambda m: sample(m, top_k=0), "top_k must be at least 1"),
    (lambda m: sample(m, top_p=0.0), r"top_p must lie in \(0, 1\]"),
    (lambda m: sample(m, top_p=1.5), r"top_p must lie in \(0, 1\]"),
    (lambda m: sample(m, max_tokens=-1), "max_tokens must be at least 0"),
    (lambda m: sample(m, num_samples=0), "num_samples must be at least 1"),
    (lambda m: beam_search(m, beam_size=0), "beam_size must be at least 1"),
    (lambda m: beam_search(m, max_tokens=-2), "max_tokens must be at least 0"),
    (lambda m: beam_search(m, length_penalty=-1.0), "length_penalty must be a finite number >= 0"),
    (lambda m: sample(m, [1, 7]), "outside the vocabulary of 5 tokens"),
    (lambda m: sample(m, "a zebra"), "'zebra' is not in the vocabulary"),
    (lambda m: generate_text(m, method="topk"), "method must be 'sample', 'greedy' or 'beam'"),
    (lambda m: generate_text(m, num_samples=3), "renders one continuation"),
])
def test_bad_arguments_say_what_to_fix(call, message):
    with pytest.raises(ValueError, match=message):
        call(MarkovLM(TRAP, WORDS))


def test_bad_types_say_what_to_fix():
    model = MarkovLM(TRAP, WORDS)
    with pytest.raises(TypeError, match="top_k must be an integer"):
        sample(model, top_k=2.5)
    with pytest.raises(TypeError, match="prompt must be a string"):
        sample(model, [0.5, 1.0])


def test_impossible_context_is_reported():
    table = TRAP.clone()
    table[1] = 0.0  # nothing can follow 'a'
    with pytest.raises(ValueError, match="no token a finite log-probability"):
        sample(MarkovLM(table, WORDS), "a")


# ---------------------------------------------------------------------------------- n-gram

def test_sampling_from_an_ngram_model():
    lines = ["the cat sat", "the dog sat", "a cat ran", "the cat ran"] * 5
    vocab = Vocab(["<eos>"] + sorted({w for line in lines for w in line.split()}))
    train = vocab.encode([w for line in lines for w in line.split() + ["<eos>"]])
    model = NGramLM(vocab, 2, smoothing="mle").fit(train)
    rows = sample(model, max_tokens=4, num_samples=50, stop_at_eos=True)
    seen = {tuple(vocab.decode(r)) for r in rows}
    allowed = {tuple(line.split() + ["<eos>"]) for line in lines + ["a cat sat"]}
    assert seen <= allowed  # an MLE bigram only walks seen bigrams
    assert len(seen) > 1
    best = beam_search(model, beam_size=3, max_tokens=5)
    assert tuple(vocab.decode(best[0].ids)) in allowed
    assert best[0].logprob == pytest.approx(float(model.score(torch.tensor(best[0].ids)).sum()), abs=1e-9)
