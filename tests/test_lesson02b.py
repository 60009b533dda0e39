"""Lesson 02b's character runs (:mod:`lmcourse.course.runs.lesson02b`): three seeds of one run, the splits they
read, the samples kept along training, and the keys of the runs trained at ``cpu`` for the course."""
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from lmcourse import config
from lmcourse.corpora.data import load_corpus
from lmcourse.course import registry
from lmcourse.course.runs import lesson02b as CR
from lmcourse.store.stored_runs import run_key

# The keys of the three `cpu` runs trained for the course (Tiny Shakespeare, about half an hour a seed on one core).
# A changed setting gives another key, and the lesson would train for hours instead of loading them.
CPU_KEYS = {0: "64a89317de70", 1: "dcc9b55e719c", 2: "57aaede6ff3f"}


def _without_seed(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k != "seed"}


@pytest.mark.parametrize("scale", config.SCALES)
def test_three_seeds_of_one_run(scale):
    runs = CR._char_lstm(scale)
    assert [s["seed"] for s in runs] == list(CR.SEEDS) == [0, 1, 2]
    assert all(_without_seed(s) == _without_seed(runs[0]) for s in runs[1:])  # only the seed differs
    assert registry.settings(CR.NAME, scale) == runs  # what the lesson reads is what the module declares
    at = runs[0]["samples_at"]
    assert at == sorted(set(at)) and len(at) >= 2  # several distinct points of training, in order


def test_splits_read_all_or_the_first_characters():
    chars = SimpleNamespace(train=torch.arange(100), valid=torch.arange(40), test=torch.arange(30))
    train, valid, test = CR.splits(chars, {"chars": None, "eval_chars": None})
    assert (len(train), len(valid), len(test)) == (100, 40, 30)
    train, valid, test = CR.splits(chars, {"chars": 10, "eval_chars": 5})
    assert train.tolist() == list(range(10)) and valid.tolist() == test.tolist() == list(range(5))


def test_fresh_depends_on_the_seed_only():
    chars = load_corpus(level="char")
    settings = CR._char_lstm("ci")
    a, b = CR.fresh(settings[0], chars), CR.fresh(settings[0], chars)
    c = CR.fresh(settings[1], chars)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(x, y) for x, y in zip(a.parameters(), c.parameters()))
    assert a.vocab is chars.vocab


def test_a_trained_run_keeps_its_samples_and_loads_with_them(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LMCOURSE_STORE_REFERENCE", raising=False)
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    chars = load_corpus(level="char")
    settings = dict(CR._char_lstm("ci")[0], corpus=chars.name, chars=4_000, eval_chars=1_000, samples_at=[2, 5])
    # stored at `cpu` only (`ci` keeps nothing): the ci-sized settings, stored in a fresh cache under `cpu`
    run = CR.train(settings, chars, "cpu", plot=False, progress=False)
    assert not run.loaded
    samples = [pair for row in run.history for pair in row["samples"]]
    assert [batch for batch, _ in samples] == [2, 5]
    prompt = CR.prompt(chars.name)
    assert all(text.startswith(prompt) and len(text) > len(prompt) for _, text in samples)
    again = CR.train(settings, chars, "cpu", plot=False, progress=False)
    assert again.loaded and [pair for row in again.history for pair in row["samples"]] == samples
    assert again.model.vocab is chars.vocab


def test_the_cpu_runs_keep_the_keys_they_were_trained_with():
    data = os.environ.get("LMCOURSE_DATA")
    if not data or not (Path(data) / "tinyshakespeare").is_dir():
        pytest.skip("Tiny Shakespeare is not here: set LMCOURSE_DATA to a folder holding tinyshakespeare/.")
    chars = load_corpus("tinyshakespeare", level="char")
    keys = {s["seed"]: run_key(CR.NAME, s, chars.vocab, "cpu", s["corpus"]) for s in CR._char_lstm("cpu")}
    assert keys == CPU_KEYS
