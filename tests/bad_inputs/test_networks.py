"""lmcourse.networks: a module built with a size that cannot work is refused at construction."""
import pytest

from lmcourse.networks.mos import MixtureOfSoftmaxes

from .helpers import assert_one_sentence

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
