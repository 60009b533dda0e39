"""Two models' losses split by training-frequency band (lmcourse.course.frequency): one sign, exact sums."""
import math

import pytest
import torch

from lmcourse.course.frequency import band_labels, band_of, compare_by_frequency, compare_log_probs


def test_bands_follow_the_edges():
    assert band_labels((1, 10, 100)) == ["unseen", "1-9", "10-99", "100+"]
    assert band_labels((1, 2, 5)) == ["unseen", "1", "2-4", "5+"]
    counts = torch.tensor([0, 1, 9, 10, 99, 100, 5000])
    assert band_of(counts, (1, 10, 100)).tolist() == [0, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("edges", [(), (0, 10), (10, 10), (100, 10)])
def test_bad_edges_get_one_sentence(edges):
    with pytest.raises(ValueError, match="band edges"):
        band_labels(edges)


def test_change_is_new_minus_base_and_the_contributions_add_up():
    # 2 seeds, 6 tokens; the new model is better (higher log p) on the unseen words only, by construction
    counts = torch.tensor([0, 0, 3, 3, 50, 50])
    base = torch.full((2, 6), -2.0, dtype=torch.float64)
    new = base.clone()
    new[:, :2] += torch.tensor([[0.5], [0.3]], dtype=torch.float64)   # seed 0 gains 0.5 nats, seed 1 0.3
    new[:, 4:] -= 0.1                                                  # and both lose 0.1 on the frequent words
    c = compare_log_probs(base, new, counts, edges=(1, 10))
    assert c.labels == ("unseen", "1-9", "10+")
    assert torch.allclose(c.change, torch.tensor([[-0.5, 0.0, 0.1], [-0.3, 0.0, 0.1]], dtype=torch.float64))
    assert torch.allclose(c.share, torch.full((3,), 1 / 3, dtype=torch.float64))
    whole = (-new).mean(1) - (-base).mean(1)                           # (S,) the change of the mean loss
    assert torch.allclose(c.total, whole)
    assert torch.allclose(c.ppl("base"), torch.full((2, 3), math.exp(2.0), dtype=torch.float64))
    table = c.markdown("untied", "tied")
    assert "change = tied − untied" in table and "-0.400 ± 0.141" in table


def test_empty_bands_are_left_out():
    c = compare_log_probs(torch.zeros(1, 3), torch.zeros(1, 3), torch.tensor([0, 200, 300]), edges=(1, 10, 100))
    assert c.labels == ("unseen", "100+") and c.tokens.tolist() == [1, 2]


def test_mismatched_inputs_get_one_sentence():
    with pytest.raises(ValueError, match="same tokens"):
        compare_log_probs(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="one model per seed"):
        compare_by_frequency([object()], [], torch.tensor([1]), torch.tensor([1]))


class _Unigram:
    """A language model that scores each token by a fixed table of log-probabilities (the one interface)."""

    def __init__(self, log_p: torch.Tensor):
        self.log_p = log_p

    def score(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.log_p[tokens]


def test_models_are_scored_and_split_by_their_training_counts():
    train = torch.tensor([1, 1, 1, 2])            # word 0 unseen, word 1 three times, word 2 once
    tokens = torch.tensor([0, 1, 2, 1])
    base = _Unigram(torch.log(torch.tensor([0.1, 0.6, 0.3], dtype=torch.float64)))
    new = _Unigram(torch.log(torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)))
    c = compare_by_frequency([base, base], [new, new], tokens, train, edges=(1, 2))
    assert c.labels == ("unseen", "1", "2+")
    want = torch.tensor([-math.log(2.0), math.log(1.5), 0.0], dtype=torch.float64)   # new − base, nats
    assert torch.allclose(c.change, want.expand(2, 3))
