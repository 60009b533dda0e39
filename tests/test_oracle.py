"""The oracle: an exact language model of the embedded corpus, on the common interface."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from lmcourse.corpora.embedded import ensure
from lmcourse.corpora.grammar import CAT, CHOICES, Params, build_lexicon
from lmcourse.corpora.oracle import Oracle
from lmcourse.lm import perplexity
from lmcourse.ngram.model import NGramLM
from lmcourse.vocab import Vocab


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = ensure(tmp_path_factory.mktemp("embedded") / "default")
    vocab = Vocab((folder / "vocab.txt").read_text().splitlines())

    def split(name):
        words = []
        for line in (folder / f"{name}.txt").read_text().splitlines():
            words += line.split() + ["<eos>"]
        return vocab.encode(words)

    return Oracle(vocab), vocab, {s: split(s) for s in ("train", "valid", "test")}


def sample_stream(oracle, n, seed):
    g = torch.Generator().manual_seed(seed)
    state, out = oracle.start(1), []
    for _ in range(n):
        x = torch.multinomial(oracle.next_log_probs(state).exp(), 1, generator=g).squeeze(1)
        out.append(int(x))
        state = oracle.advance(state, x)
    return torch.tensor(out)


def test_next_token_distribution_sums_to_one_and_matches_score(setup):
    oracle, vocab, splits = setup
    x = splits["valid"][:2500]
    lex = build_lexicon(Params())
    cats = lex.cat[x.numpy()]
    assert (cats == CAT["NAME"]).any() and (cats == CAT["VALUE"]).any() and (x == vocab.stoi["<doc>"]).any()
    s = oracle.states(x.numpy())
    assert (oracle.gram.symbol(s, x.numpy(), lex.cat) >= len(CAT)).any()  # words inside fixed expressions
    assert (oracle.gram.context[s] > 0).any()       # states where a fixed expression claims a word
    state, gathered = oracle.start(1), []
    for t in range(len(x)):
        logp = oracle.next_log_probs(state)[0]
        assert abs(float(torch.logsumexp(logp, 0))) < 1e-9
        gathered.append(float(logp[x[t]]))
        state = oracle.advance(state, x[t:t + 1])
    assert np.allclose(gathered, oracle.score(x).numpy(), atol=1e-10, rtol=0)


def next_word(oracle, vocab, text):
    state = oracle.start(1)
    for w in text.split():
        state = oracle.advance(state, torch.tensor([vocab.stoi[w]]))
    return oracle.next_log_probs(state)[0].exp()


def test_inside_a_fixed_expression_the_words_before_decide(setup):
    oracle, vocab, _ = setup
    p = next_word(oracle, vocab, "at the end of the")                # a sentence-initial adverbial
    period = CHOICES["period"]
    for w, weight in period.items():
        assert float(p[vocab.stoi[w]]) == pytest.approx(weight / sum(period.values()), abs=1e-6)
    p = next_word(oracle, vocab, "the bank offers the stock at")     # after the object, "at" opens one
    assert float(p[vocab.stoi["the"]]) == pytest.approx(1.0, abs=1e-9)
    p = next_word(oracle, vocab, "the bank offers the stock for the first")
    assert float(p[vocab.stoi["time"]]) == pytest.approx(1.0, abs=1e-9)
    p = next_word(oracle, vocab, "the bank offers the stock of the")  # an ordinary noun phrase
    assert float(p[vocab.stoi["end"]]) == 0 and float(p.max()) < 0.2
    p = next_word(oracle, vocab, "the bank offers $ N")               # $ N million / billion / a share
    assert float(p[[vocab.stoi[w] for w in ("million", "billion", "a")]].sum()) == pytest.approx(1.0, abs=1e-9)
    assert float(p[vocab.stoi["percent"]]) == 0
    p = next_word(oracle, vocab, "the bank offers N")                 # N percent, N million, N cents ...
    assert float(p[vocab.stoi["percent"]]) > 0.1 and float(p[vocab.stoi["cents"]]) > 0.01


def test_batched_steps_and_reorder(setup):
    oracle, _, splits = setup
    a, b = splits["valid"][:300], splits["test"][:300]
    state = oracle.start(2)
    for t in range(300):
        state = oracle.advance(state, torch.stack([a[t], b[t]]))
    swapped = oracle.reorder(state, torch.tensor([1, 0]))
    assert torch.equal(oracle.next_log_probs(swapped), oracle.next_log_probs(state).flip(0))


def test_samples_reproduce_the_oracles_own_statistics(setup):
    oracle, vocab, splits = setup
    sample = sample_stream(oracle, 3000, seed=0)
    on_sample = -oracle.score(sample).mean().item()
    on_corpus = -oracle.score(splits["test"]).mean().item()
    assert on_sample == pytest.approx(on_corpus, rel=0.08)      # same entropy rate
    eos_rate = (sample == vocab.eos).float().mean().item()
    assert eos_rate == pytest.approx((splits["test"] == vocab.eos).float().mean().item(), rel=0.2)
    the = vocab.stoi["the"]
    assert (sample == the).float().mean().item() == pytest.approx((splits["test"] == the).float().mean().item(), rel=0.25)


def test_oracle_is_below_the_ngram_models(setup):
    oracle, vocab, splits = setup
    floor = perplexity(oracle, splits["test"])
    for order in (1, 3, 5):
        for smoothing in ("addk", "mkn"):
            lm = NGramLM(vocab, order, smoothing=smoothing).fit(splits["train"])
            assert floor < perplexity(lm, splits["test"])


def test_lookup_log_probabilities_have_high_rank():
    lex = build_lexicon(Params())
    A = np.log(lex.lookup / lex.lookup.sum(1, keepdims=True))
    assert np.linalg.matrix_rank(A) == min(A.shape)
    flat = build_lexicon(replace(Params(), lookup_sharpness=0.0)).lookup
    assert np.linalg.matrix_rank(np.log(flat / flat.sum(1, keepdims=True))) <= 1


def test_other_vocabularies_are_refused():
    with pytest.raises(ValueError, match="only scores the embedded corpus"):
        Oracle(Vocab(["<eos>", "a", "b"]))
