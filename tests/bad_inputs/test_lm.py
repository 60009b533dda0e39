"""lmcourse.lm and lmcourse.vocab: the interface every model answers, with its arithmetic kept finite."""
import math

import pytest
import torch

from lmcourse import errors
from lmcourse.lm import perplexity
from lmcourse.vocab import Vocab

from .helpers import assert_one_sentence, WORDS

# ---------------------------------------------------------------------------------- the vocabulary


@pytest.mark.parametrize("call, error, pattern", [
    (lambda v: v.decode([-1]), ValueError, r"Token id -1 is outside the vocabulary of 6 tokens"),
    (lambda v: v.decode(torch.tensor([6])), ValueError, r"Token id 6 is outside"),
    (lambda v: v.decode(torch.tensor([1.0])), TypeError, r"must be integers, got torch\.float32"),
    (lambda v: v.encode("the cat"), TypeError, r"got one string: split it first"),
    (lambda v: v.encode(["the", "zebra"]), KeyError, r"The token 'zebra' is not in the vocabulary"),
    (lambda v: Vocab(["a", 1]), TypeError, r"Every token must be a non-empty string, got 1"),
    (lambda v: Vocab(["a", ""]), TypeError, r"non-empty string, got ''"),
    (lambda v: Vocab("the cat"), TypeError, r"got one string: split it first"),
    (lambda v: Vocab(["a", "a"]), ValueError, r"lists a token twice"),
])
def test_vocabulary_misuse(call, error, pattern):
    with pytest.raises(error) as err:
        call(Vocab(WORDS))
    assert_one_sentence(errors.sentence(err.value), pattern)


# -------------------------------------------------------------------------------------- perplexity


def test_a_huge_finite_loss_is_an_infinite_perplexity_not_an_overflow():
    class Terrible:
        def score(self, tokens):
            return torch.full((len(tokens),), -1e6, dtype=torch.float64)
    assert perplexity(Terrible(), [0, 1]) == math.inf
