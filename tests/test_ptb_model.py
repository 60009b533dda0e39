"""The real-text course model (lmcourse.course.runs.ptb_model): its settings per scale, the one sentence a lesson
prints when the PTB runs are not stored, and every number the lessons read, computed at ci on Penn Treebank."""
import pytest

from lmcourse.corpora.data import load_corpus
from lmcourse.course.runs import ptb_model as P


@pytest.fixture(scope="module")
def ptb(real_data_dir):
    return load_corpus("ptb")


def test_the_rungs_differ_only_in_dropouts_and_tying():
    shared = P.settings("cpu")
    plain, regular = (P.rung_settings(rung, 0, shared) for rung in P.RUNGS)
    differ = {k for k in {*plain, *regular} if plain.get(k) != regular.get(k)}
    assert differ == {"rung", "dropout", "dropouti", "dropoute", "wdrop", "tie"}
    assert plain["tie"] is False and regular["tie"] is True
    assert all(regular[k] == P.AWD_PTB_DROPOUTS[k] / 2 for k in ("dropout", "dropouti", "dropoute", "wdrop"))
    assert shared["train_tokens"] is None and shared["eval_tokens"] is None  # the whole splits at cpu


def test_the_tuned_settings_can_fall_inside_each_grid():
    grid = P.grids("cpu")
    assert len(grid["cache"]["thetas"]) >= 3 and len(grid["cache"]["lams"]) >= 3
    assert len(grid["dyneval"]["lrs"]) >= 3


def test_pending_names_what_is_missing_at_cpu_and_nothing_at_ci(ptb, tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_REFERENCE_RUNS", str(tmp_path / "none"))
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    said = P.pending("cpu", ptb)
    assert said is not None and "9 of its stored results" in said and "make runs LESSONS=09" in said
    assert P.pending("ci", ptb) is None


def test_numbers_at_ci_hold_every_row_per_seed(ptb, tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    found = P.numbers("ci", ptb, progress=False)
    rows = {"KN5", *P.RUNGS, "+ cache", "dynamic evaluation alone", "+ dynamic evaluation", "training-text control"}
    assert set(found["test"]) == rows
    assert all(len(v) == len(P.SEEDS) for v in found["test"].values())
    assert all(p > 1 for v in found["test"].values() for p in v)
    for summary in found["wrappers"]:  # each tuned setting is one of its grid's points
        theta_at, lam_at = summary["cache_at"]
        assert summary["cache"]["theta"] == P.grids("ci")["cache"]["thetas"][theta_at]
        assert summary["cache"]["lam"] == P.grids("ci")["cache"]["lams"][lam_at]


def test_the_committed_cpu_numbers_meet_the_real_text_bar(ptb, tmp_path, monkeypatch):
    """Read from reference_runs/ alone (no training, an empty user cache): with the dropouts and tying, every seed's
    PTB test perplexity is at most KN5's published 141.2 less 20%; the cache and dynamic evaluation each lower it
    beyond the seeds' spread, and it beats the LSTM without dropout beyond the spread."""
    from lmcourse.course.seeds import beyond_spread
    from lmcourse.literature import published

    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    assert P.pending("cpu", ptb) is None, "every PTB result the lessons read is committed"
    test = P.numbers("cpu", ptb, progress=False)["test"]
    assert len(test[P.RUNG]) == len(P.SEEDS) == 3
    assert max(test[P.RUNG]) <= 0.8 * published("ptb", "KN5").test, test[P.RUNG]
    for row in ("+ cache", "dynamic evaluation alone", "+ dynamic evaluation"):
        assert beyond_spread(test[row], test[P.RUNG]), (row, test[row], test[P.RUNG])
    assert beyond_spread(test[P.RUNG], test["LSTM"]), (test[P.RUNG], test["LSTM"])
    assert beyond_spread(test["LSTM"], test["KN5"]), (test["LSTM"], test["KN5"])
