"""Stored measurements: computed once, loaded after, committed copies first and checked by sha256."""
import pytest
import torch

from lmcourse import config
from lmcourse.store import reference_runs as reference
from lmcourse.store import stored_numbers
from lmcourse.vocab import Vocab

AT = dict(scale="cpu", dataset="embedded")  # the key parts the store is given (it reads no global)

VOCAB = Vocab(["<eos>", "a", "b"])


def _setup(monkeypatch, tmp_path, store=False, scale="cpu"):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(tmp_path / "reference"))
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    monkeypatch.setenv(reference.STORE_ENV, "1" if store else "0")
    monkeypatch.setattr(config, "SCALE", scale)


def _compute(calls, value=1.5):
    def compute():
        calls.append(value)
        return {"log_p": torch.tensor([-value, -2.0]), "seconds": value, "n": 2}
    return compute


def test_a_measurement_is_computed_once_then_loaded(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path)
    calls = []
    first = stored_numbers.compute_or_load("08-x", {"lr": 1}, _compute(calls), VOCAB, **AT)
    again = stored_numbers.compute_or_load("08-x", {"lr": 1}, _compute(calls, 9.0), VOCAB, **AT)
    other = stored_numbers.compute_or_load("08-x", {"lr": 2}, _compute(calls, 3.0), VOCAB, **AT)
    assert calls == [1.5, 3.0] and not first["loaded"] and again["loaded"] and not other["loaded"]
    assert torch.equal(first["log_p"], again["log_p"]) and again["seconds"] == 1.5
    assert reference.read_manifest() == []                            # nothing committed unless asked
    monkeypatch.setenv("LMCOURSE_RETRAIN", "1")
    assert stored_numbers.compute_or_load("08-x", {"lr": 1}, _compute(calls, 4.0), VOCAB, **AT)["seconds"] == 4.0


def test_the_ci_scale_stores_nothing(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True, scale="ci")
    calls = []
    for _ in range(2):
        stored_numbers.compute_or_load("08-x", {}, _compute(calls), VOCAB, scale="ci", dataset="embedded")
    assert calls == [1.5, 1.5] and not list(tmp_path.rglob("*.pt")) and reference.read_manifest() == []


def test_a_committed_copy_comes_first_and_a_damaged_one_is_computed_afresh(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    calls = []
    stored_numbers.compute_or_load("08-x", {"lr": 1}, _compute(calls), VOCAB, **AT)
    entry, = reference.read_manifest()
    assert entry["kind"] == "numbers" and entry["lesson"] == "08" and entry["settings"] == {"lr": 1}
    assert entry["sha256"] == reference.sha256(tmp_path / "reference" / entry["file"])
    monkeypatch.setenv(reference.STORE_ENV, "0")
    for path in (tmp_path / "cache").rglob("*.pt"):
        path.unlink()
    loaded = stored_numbers.compute_or_load("08-x", {"lr": 1}, _compute(calls, 7.0), VOCAB, **AT)
    assert loaded["loaded"] and loaded["seconds"] == 1.5 and calls == [1.5]
    (tmp_path / "reference" / entry["file"]).write_bytes(b"not a tensor file")
    with pytest.warns(RuntimeWarning, match="sha256"):
        fresh = stored_numbers.compute_or_load("08-x", {"lr": 1}, _compute(calls, 7.0), VOCAB, **AT)
    assert not fresh["loaded"] and fresh["seconds"] == 7.0


def test_a_cached_measurement_is_promoted_when_storing(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path)
    stored_numbers.compute_or_load("08-x", {}, _compute([]), VOCAB, **AT)
    monkeypatch.setenv(reference.STORE_ENV, "1")
    calls = []
    assert stored_numbers.compute_or_load("08-x", {}, _compute(calls), VOCAB, **AT)["loaded"] and calls == []
    assert [r["name"] for r in reference.read_manifest()] == ["08-x"]


def test_bad_names_and_results_are_refused(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match="plain file name"):
        stored_numbers.compute_or_load("../x", {}, _compute([]), VOCAB, **AT)
    with pytest.raises(TypeError, match="must return a dict"):
        stored_numbers.compute_or_load("08-y", {}, lambda: [1, 2], VOCAB, **AT)


def test_lesson_08_declares_one_pass_per_seed_at_every_scale():
    import json

    from lmcourse.course import registry
    from lmcourse.course.runs import lesson08
    for scale in ("ci", "cpu", "gpu"):
        declared = registry.settings(lesson08.NAME, scale)
        keys = [json.dumps(s, sort_keys=True) for s in declared]
        assert len(set(keys)) == len(keys) == len(lesson08.SEEDS)
        assert [s["seed"] for s in declared] == list(lesson08.SEEDS)
        assert all(s["dyneval"] == lesson08.grids(scale) and s["rung"] == lesson08.RUNG for s in declared)
    with pytest.raises(ValueError, match="is not a scale"):
        lesson08.pass_settings(0, "huge")
