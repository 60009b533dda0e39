"""The stored runs of lessons 02b (the shared word LSTM), 03 and 04: declared once, shared, owned by their lesson."""
import pytest

from lmcourse import config
from lmcourse.course import registry
from lmcourse.course.runs import lesson03, lesson04, word_lstm
from lmcourse.course.runs import lesson08
from lmcourse.store import reference_runs as reference
from lmcourse.store import stored_numbers

AT = dict(scale="cpu", dataset="embedded")  # the key parts the store is given (it reads no global)


@pytest.mark.parametrize("scale", config.SCALES)
def test_the_declarations_are_built_from_the_lessons_knobs(scale):
    k3, k4 = lesson03.knobs(scale), lesson04.knobs(scale)
    dropout = lesson03.dropout_runs(k3)
    assert registry.settings("03-dropout", scale) == list(dropout.values())
    assert len(dropout) == 6 * len(k3["SEEDS"])
    assert all(s["eval_tokens"] == (k3["EVAL_TOKENS"] if name == k3["TABLE_VARIANT"] else None)
               for (name, _), s in dropout.items())
    tying = lesson04.tying_runs(k4)
    whole, measured = registry.settings("04-tying", scale), registry.settings("04-tying-measured", scale)
    assert whole == [tying[tie, k4["SEEDS"][0]] for tie in (False, True)]
    assert measured == [tying[tie, s] for s in k4["SEEDS"][1:] for tie in (False, True)]


def test_a_changed_knob_gives_other_settings():
    k = lesson03.knobs("cpu")
    before = lesson03.dropout_runs(k)
    after = lesson03.dropout_runs(dict(k, EPOCHS=k["EPOCHS"] + 1))
    assert before.keys() == after.keys() and all(before[key] != after[key] for key in before)


@pytest.mark.parametrize("scale", ["ci", "cpu", "gpu"])
def test_lesson_08_wraps_the_declared_course_model(scale):
    """Lesson 08's stored passes carry the course model's settings in their keys: the rung it loads, as declared."""
    from lmcourse.course.runs import course_model

    trained = registry.settings(course_model.NAME, scale)
    for seed in lesson08.SEEDS:
        settings = dict(lesson08.pass_settings(seed, scale))
        grids = settings.pop("dyneval")
        assert settings in trained and settings["rung"] == lesson08.RUNG and settings["seed"] == seed
        assert grids == lesson08.grids(scale)


def test_lesson_08_grids_are_sorted_and_hold_no_decay():
    """Each rule's rates rise (so that 'inside the grid' means between two tried rates) and each decay grid holds 0."""
    for grid in (lesson08.RULE, lesson08.SGD_GRID):
        assert grid["lrs"] == sorted(set(grid["lrs"])) and len(grid["lrs"]) >= 3
        assert grid["decays"][0] == 0.0 and grid["decays"] == sorted(set(grid["decays"]))
    assert lesson08.RULE["method"] == "rms" and lesson08.SGD_GRID["method"] == "sgd"


def test_the_word_lstm_belongs_to_lesson_02b(monkeypatch, tmp_path):
    assert registry.lesson_of("word-lstm") == registry.lesson_of("word-lstm-gpu") == "02b"
    assert registry.lesson_of("03-dropout") == "03" and registry.lesson_of("02b-char-lstm") == "02b"
    assert registry.lesson_of("08-dyneval") == "08" and registry.lesson_of("nothing") == ""
    assert registry.lesson_of("course-model") == "09"  # the course model: no lesson in its name, lesson 09 owns it
    assert all(registry.lesson_of(name) == reference.lesson_of(name) for name in registry.REGISTRY
               if reference.lesson_of(name))  # the store's rule from the name agrees where a name has a lesson
    # a stored measurement of a lettered lesson is its own too
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(tmp_path / "reference"))
    monkeypatch.setenv(reference.STORE_ENV, "1")
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    monkeypatch.setattr(config, "SCALE", "cpu")
    from lmcourse.vocab import Vocab
    stored_numbers.compute_or_load("02b-demo", {"s": 1}, lambda: {"x": 1.0}, Vocab(["<eos>", "a"]), **AT)
    assert [r["lesson"] for r in reference.read_manifest()] == ["02b"]
    # a run whose name starts with no lesson is entered as the lesson it is given
    stored_numbers.compute_or_load("shared-demo", {"s": 1}, lambda: {"x": 1.0}, Vocab(["<eos>", "a"]), **AT, lesson="02b")
    assert {r["name"]: r["lesson"] for r in reference.read_manifest()} == {"02b-demo": "02b", "shared-demo": "02b"}


def test_make_runs_picks_the_lessons_that_store_measurements_only(tmp_path):
    from lmcourse.course import lessons
    (tmp_path / "01_a.ipynb").write_text('{"cells": [{"source": "print(1)"}]}')
    (tmp_path / "03_c.ipynb").write_text('{"cells": [{"source": "print(2)"}]}')
    assert [p.name for p in lessons.with_runs(lessons.lessons(folder=tmp_path))] == ["03_c.ipynb"]
    real = [lessons.lesson_id(p) for p in lessons.with_runs(lessons.lessons())]
    assert real == ["02b", "03", "04", "05", "08", "09", "10"]


def test_the_one_training_function_loads_the_committed_word_lstm(monkeypatch):
    """Keyed as before the move, whatever the global scale: the committed run, not a fresh training."""
    from lmcourse.corpora.data import load_corpus

    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    monkeypatch.setattr(config, "SCALE", "ci")

    def never():
        raise AssertionError("the shared word LSTM was trained instead of loaded")

    monkeypatch.setattr(word_lstm, "fresh", lambda *a, **k: never())
    run = word_lstm.train(load_corpus("embedded"), "cpu", "embedded")
    name, settings = word_lstm.word_lstm("cpu")
    assert run.loaded and run.path.parent == reference.folder() and run.path.name.startswith(name + "-")
    assert len(run.history) == settings["epochs"] and run.model.config.tie


def test_the_command_line_reaches_the_word_lstm_through_its_function(capsys):
    from lmcourse.cli.main import build_parser

    args = build_parser().parse_args(["word-lstm", "--scale", "cpu"])
    assert args.run.__module__ == "lmcourse.cli.word_lstm" and args.scale == "cpu"
    import inspect
    assert "word_lstm.train(" in inspect.getsource(args.run)
