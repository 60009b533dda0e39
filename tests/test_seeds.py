"""The course's one ranking rule over seeds (lmcourse.course.seeds)."""
import pytest

from lmcourse.course.seeds import beyond_spread, describe, gap, mean_sd


def test_mean_sd_is_the_sample_statistics():
    m, s = mean_sd([1.0, 2.0, 3.0])
    assert m == 2.0 and s == 1.0
    assert mean_sd([5.0]) == (5.0, 0.0)


def test_a_gap_wider_than_both_spreads_ranks():
    assert beyond_spread([10.0, 10.2, 9.8], [12.0, 12.2, 11.8])   # gap 2 > 0.2 + 0.2
    assert not beyond_spread([12.0, 12.2, 11.8], [10.0, 10.2, 9.8])  # the wrong way round


def test_a_gap_inside_the_spreads_does_not_rank():
    assert not beyond_spread([10.0, 11.0, 12.0], [10.5, 11.5, 12.5])  # gap 0.5 < 1 + 1
    # sd of [0, 2] is sqrt(2) = 1.414; against a constant side the gap must pass 1.414
    assert not beyond_spread([0.0, 2.0], [2.25, 2.25])  # gap 1.25
    assert beyond_spread([0.0, 2.0], [3.0, 3.0])        # gap 2.0


def test_one_seed_never_ranks():
    assert not beyond_spread([1.0], [100.0, 101.0])
    assert not beyond_spread([1.0, 1.1], [100.0])


def test_gap_and_describe():
    assert gap([9.0, 9.0], [10.0, 10.0]) == pytest.approx(-0.1)
    assert describe([1.0, 2.0, 3.0]) == "2.00 ± 1.00"


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_bad_scores_get_one_sentence(bad):
    with pytest.raises(ValueError, match="score"):
        mean_sd(bad)
