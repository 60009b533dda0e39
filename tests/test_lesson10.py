"""Lesson 10's runs: the Transformer sized to the AWD rung's parameters, its budgets, and their declaration."""
from pathlib import Path

import pytest
import torch

from lmcourse.course import registry
from lmcourse.course.runs import lesson09 as L9, lesson10 as L10
from lmcourse.networks.models import RNNLM
from lmcourse.networks.transformer import count_parameters


@pytest.mark.parametrize("V", [1599, 10_000])
@pytest.mark.parametrize("scale", ["cpu", "gpu"])
def test_the_transformer_has_the_awd_rungs_parameters_within_one_percent(scale, V):
    shared = L9.shared_settings(scale)
    with torch.device("meta"):  # sizes only, no memory
        awd = RNNLM(L9.model_config(L9.rung_settings("AWD recipe", 0, shared), V)).num_parameters()
    ours = count_parameters(L10.model_config(L10.transformer_settings("equal parameters", 0, shared, scale), V))
    assert abs(ours / awd - 1) < 0.01, (ours, awd)


def test_the_budgets_differ_only_in_epochs():
    shared = L9.shared_settings("cpu")
    a, b = (L10.transformer_settings(budget, 1, shared, "cpu") for budget in L10.BUDGETS)
    assert a["epochs"] == shared["epochs"] and b["epochs"] == L10.EPOCHS_EQUAL_TIME["cpu"]
    assert {k: v for k, v in a.items() if k not in ("epochs", "budget", "rung")} == \
        {k: v for k, v in b.items() if k not in ("epochs", "budget", "rung")}
    assert "hidden_size" not in a and L10.model_config(a, 100).window == shared["bptt"]  # the window is the BPTT length
    with pytest.raises(ValueError, match="not a budget of lesson 10"):
        L10.transformer_settings("equal luck", 0, shared, "cpu")


def test_the_equal_time_budget_follows_from_its_timing():
    # the lesson prints EQUAL_TIME_TIMING as what set the budget: the count must be what those seconds give
    shared, timing = L9.shared_settings("cpu"), L10.EQUAL_TIME_TIMING["cpu"]
    assert L10.EPOCHS_EQUAL_TIME["cpu"] == L10.epochs_for_time(shared["epochs"] * timing["awd_s"], timing["transformer_s"])
    assert L10.EPOCHS_EQUAL_TIME["cpu"] < shared["epochs"]       # the Transformer's epoch was measured the slower one
    # the committed equal-time runs' key holds this count: a new timing that gives
    # another count retrains them, which `make runs LESSONS=10` does; the comment beside the count must follow
    source = (Path(L10.__file__)).read_text()
    n = L10.EPOCHS_EQUAL_TIME["cpu"]
    said = f"{shared['epochs']} x {timing['awd_s']:.2f} s hold {n} epochs of {timing['transformer_s']:.2f} s"
    assert said in source, f"lesson10.py's comment should say '{said}'"


def test_epochs_for_time():
    assert L10.epochs_for_time(65.0, 2.0) == 32 and L10.epochs_for_time(1.0, 5.0) == 1
    with pytest.raises(ValueError, match="seconds_per_epoch must be a positive number"):
        L10.epochs_for_time(65.0, 0.0)


@pytest.mark.parametrize("scale", ["ci", "cpu", "gpu"])
def test_every_run_is_declared_once_per_seed(scale):
    for name in ("10-transformer", "10-equal-time", "10-wrappers"):
        declared = registry.settings(name, scale)
        assert [s["seed"] for s in declared] == list(L10.SEEDS), name


def test_the_wrappers_tune_dynamic_evaluation_over_lesson_10s_own_rates(monkeypatch):
    from lmcourse.networks.transformer import TransformerLM

    shared = L9.shared_settings("ci")
    assert L10.wrapper_settings(0, shared, "ci")["wrappers"]["dyneval"] == L10.DYN_GRID
    assert min(L10.DYN_GRID["lrs"]) < min(L9.DYN_GRID["lrs"])  # it reaches below the ladder's grid
    corpus = L9.ladder_corpus(L9.ladder_params("ci"))
    torch.manual_seed(0)
    model = TransformerLM(L10.model_config(L10.transformer_settings("equal parameters", 0, shared, "ci"),
                                           len(corpus.vocab))).eval()
    model.vocab = corpus.vocab
    rate = 2e-7  # on neither grid: only a grid handed down through L10.wrappers can choose it
    monkeypatch.setattr(L10, "DYN_GRID", dict(L10.DYN_GRID, lrs=[rate], decays=[0.0], tune_tokens=300))
    notes = L10.wrappers(model, corpus)["notes"]
    assert notes["+ dynamic evaluation"]["lr"] == rate and notes["+ dynamic evaluation"]["rule"] == "rms"


def test_the_stored_results_are_keyed_by_the_variant_whatever_lmcourse_dataset_says(monkeypatch):
    from lmcourse import config
    monkeypatch.setattr(config, "DATASET", "ptb")                 # as LMCOURSE_DATASET=ptb would set it
    monkeypatch.setattr(config, "SCALE", "cpu")
    assert L9.DATASET == L10.DATASET == config.EMBEDDED          # the lessons read the course model's variant only
    assert L10._key_parts(None, None) == {"scale": "cpu", "dataset": config.EMBEDDED}
    assert L10._key_parts("ci", "ptb") == {"scale": "ci", "dataset": "ptb"}   # a dataset given is kept
