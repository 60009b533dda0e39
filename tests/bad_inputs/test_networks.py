"""lmcourse.networks: a module built with a size that cannot work is refused at construction."""
import math

import pytest
import torch

from lmcourse.lm import perplexity
from lmcourse.networks.generate import beam_search, sample, sampling_distribution
from lmcourse.networks.models import count_parameters, LMConfig, RNNLM
from lmcourse.networks.mos import MixtureOfSoftmaxes
from lmcourse.ngram.model import NGramLM
from lmcourse.vocab import Vocab

from .helpers import assert_one_sentence, WORDS

GOOD = dict(in_size=4, emb_size=3, vocab_size=5, n_experts=2)


@pytest.mark.parametrize("change, error, pattern", [
    (dict(n_experts=0), ValueError, r"n_experts must be at least 1, got 0"),
    (dict(n_experts=-3), ValueError, r"n_experts must be at least 1, got -3"),
    (dict(n_experts=2.5), TypeError, r"n_experts must be a whole number"),
    (dict(vocab_size=0), ValueError, r"vocab_size must be at least 1, got 0"),
    (dict(emb_size=0), ValueError, r"emb_size must be at least 1"),
    (dict(in_size=0), ValueError, r"in_size must be at least 1"),
    (dict(vector_size=0), ValueError, r"vector_size must be at least 1"),
    (dict(dropoutl=1.0), ValueError, r"dropoutl must be a finite number >= 0 and < 1"),
    (dict(dropoutl=float("nan")), ValueError, r"dropoutl must be a finite number"),
    (dict(init_range=-0.1), ValueError, r"init_range must be a finite number >= 0"),
], ids=lambda v: str(v) if isinstance(v, dict) else "")
def test_a_mixture_of_softmaxes_with_an_impossible_size_is_one_sentence(change, error, pattern):
    with pytest.raises(error) as err:
        MixtureOfSoftmaxes(**{**GOOD, **change})
    assert_one_sentence(str(err.value), pattern)


def test_the_smallest_sizes_are_accepted():
    head = MixtureOfSoftmaxes(in_size=1, emb_size=1, vocab_size=1, n_experts=1)
    assert head.n_experts == 1 and head.weight.shape == (1, 1)


# ---------------------------------------------------------------------------- scoring and decoding


@pytest.fixture(scope="module")
def ngram():
    vocab = Vocab(WORDS)
    return NGramLM(vocab, 2, "kn").fit(vocab.encode("the cat sat on the mat <eos>".split() * 3))


@pytest.mark.parametrize("tokens, error, pattern", [
    (["the"], TypeError, r"got strings: encode the words first with the model's vocabulary"),
    ("the cat", TypeError, r"got strings: encode the words"),
    ([0, "cat"], TypeError, r"got strings"),
    (None, TypeError, r"Expected a 1-D tensor or list of integer token ids, got NoneType"),
    ({0, 1}, TypeError, r"got set"),
    ([2 ** 70], TypeError, r"integer token ids"),
    (torch.tensor([0.0, 1.0]), TypeError, r"Token ids must be integers, got torch\.float32"),
    (torch.tensor([True]), TypeError, r"must be integers, got torch\.bool"),
    (torch.zeros(2, 2, dtype=torch.long), ValueError, r"Expected a 1-D stream .* flatten it first"),
    ([0, 6], ValueError, r"Token id 6 is outside the vocabulary of 6"),
    ([-1, 0], ValueError, r"Token id -1 is outside the vocabulary"),
    ([], ValueError, r"The token stream is empty"),
])
def test_scoring_bad_tokens(ngram, tokens, error, pattern):
    with pytest.raises(error) as err:
        ngram.score(tokens)
    assert_one_sentence(str(err.value), pattern)


def test_perplexity_of_something_that_is_not_a_model():
    with pytest.raises(TypeError) as err:
        perplexity("kn5", torch.tensor([0, 1]))
    assert_one_sentence(str(err.value), r"a language model with a score\(tokens\) method, got str")


@pytest.mark.parametrize("call, error, pattern", [
    (lambda m: beam_search(m, length_penalty=math.nan), ValueError, r"length_penalty must be a finite number >= 0"),
    (lambda m: beam_search(m, length_penalty=math.inf), ValueError, r"length_penalty must be a finite number"),
    (lambda m: beam_search(m, length_penalty=True), ValueError, r"length_penalty"),
    (lambda m: sample(m, temperature=math.nan), ValueError, r"temperature must be >= 0"),
    (lambda m: sample(m, temperature=math.inf), ValueError, r"temperature must be >= 0"),
    (lambda m: sample(m, top_p=math.nan), ValueError, r"top_p must lie in \(0, 1\]"),
    (lambda m: sample(m, top_k=2.0), TypeError, r"top_k must be an integer"),
    (lambda m: sample(m, generator=0), TypeError, r"generator must be a torch\.Generator"),
    (lambda m: sample(m, seed=-1), ValueError, r"seed must be at least 0"),
    (lambda m: sample(m, "the zebra"), ValueError, r"'zebra' is not in the vocabulary"),
    (lambda m: sample("kn5"), TypeError, r"Expected a language model"),
])
def test_decoding_arguments(ngram, call, error, pattern):
    with pytest.raises(error) as err:
        call(ngram)
    assert_one_sentence(str(err.value), pattern)


def test_a_tiny_temperature_is_greedy_not_a_false_error():
    logp = torch.log_softmax(torch.tensor([[0.0, 2.0, 1.0]]), dim=-1)
    probs = sampling_distribution(logp, temperature=1e-310)  # log p / T overflows to -inf for every token
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64))


def test_below_the_reciprocals_range_the_limit_is_taken_without_dividing():
    """1/T overflows below T = 5.6e-309 (CUDA divides through the reciprocal): tied best tokens share the mass,
    and a row with no finite log-probability is still the one-sentence error."""
    logp = torch.tensor([[-0.5, -3.0, -0.5, float("-inf")]])
    probs = sampling_distribution(logp, temperature=5e-324)  # the smallest positive double
    assert torch.equal(probs, torch.tensor([[0.5, 0.0, 0.5, 0.0]], dtype=torch.float64))
    with pytest.raises(ValueError) as err:
        sampling_distribution(torch.full((1, 3), float("-inf")), temperature=5e-324)
    assert_one_sentence(str(err.value), r"The model gives no token a finite log-probability")


# ------------------------------------------------------------------------------- the model's sizes


@pytest.mark.parametrize("sizes", [dict(hidden_size=10**8), dict(vocab_size=10**7, emb_size=10**5)])
def test_a_model_too_big_for_the_machine_is_one_sentence_before_any_allocation(sizes):
    config = LMConfig(**{"vocab_size": 10, "num_layers": 1, **sizes})
    with pytest.raises(ValueError) as err:
        RNNLM(config)
    assert_one_sentence(str(err.value), r"The model has about [0-9,]+ parameters, [0-9,.]+ GB of weights before any "
                                        r"gradient, more than the [0-9,.]+ GB of memory of this machine: lower "
                                        r"hidden_size, emb_size or num_layers")
    with torch.device("meta"):  # a skeleton, no memory: counted exactly as the check counts
        assert RNNLM(config).num_parameters() == count_parameters(config)


def test_the_parameter_count_before_building_matches_the_built_model():
    for config in (LMConfig(50, emb_size=8, hidden_size=12, num_layers=3), LMConfig(50, emb_size=8, tie=True,
                                                                                    hidden_size=12, num_layers=2)):
        assert count_parameters(config) == RNNLM(config).num_parameters()


@pytest.mark.parametrize("kwargs, pattern", [
    ({"init_range": math.inf}, r"LMConfig\.init_range must be a finite number > 0, got inf"),
    ({"init_range": math.nan}, r"LMConfig\.init_range must be a finite number > 0, got nan"),
    ({"last_size": -4}, r"LMConfig\.last_size must be a positive integer or None, got -4"),
    ({"head": "foo"}, r"LMConfig\.head='foo' is unknown: use one of mos, softmax"),
    ({"dropout": True}, r"LMConfig\.dropout=True is not a dropout probability"),
])
def test_model_config_checks_every_number_at_construction(kwargs, pattern):
    with pytest.raises(ValueError) as err:
        LMConfig(vocab_size=10, **kwargs)
    assert_one_sentence(str(err.value), pattern)
