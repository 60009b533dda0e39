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
def test_the_declarations_are_built_from_the_course_model(scale):
    from lmcourse.course.runs import course_model

    k4 = lesson04.knobs(scale)
    shared = lesson03.lesson_shared(scale)
    course = course_model.shared_settings(scale)
    assert {k for k in shared if shared[k] != course[k]} == {"hidden_size"}  # the lesson's one change of regime
    assert shared["hidden_size"] == lesson03.WIDTH * course["emb_size"]
    dropout = registry.settings("03-dropout", scale)
    assert dropout == [lesson03.variant_settings(v, seed, shared) for seed in course_model.SEEDS
                       for v in lesson03.VARIANTS]
    assert len(dropout) == 8 * len(course_model.SEEDS)
    for s in dropout:  # each variant is its rung's settings with a change to the model dict only
        rung = course_model.rung_settings(s["rung"], s["seed"], shared)
        assert {k: v for k, v in s.items() if k not in ("model", "variant")} == {k: v for k, v in rung.items() if k != "model"}
        assert (s["model"] == rung["model"]) == (s["variant"] in lesson03.RUNGS)
    tying = lesson04.tying_runs(k4)
    whole, measured = registry.settings("04-tying", scale), registry.settings("04-tying-measured", scale)
    assert whole == [tying[tie, k4["SEEDS"][0]] for tie in (False, True)]
    assert measured == [tying[tie, s] for s in k4["SEEDS"][1:] for tie in (False, True)]


def test_a_changed_course_model_gives_other_settings():
    from lmcourse.course.runs import course_model

    shared = lesson03.lesson_shared("cpu")
    before = lesson03.variant_settings(lesson03.BRANCHES[1], 0, shared)
    after = lesson03.variant_settings(lesson03.BRANCHES[1], 0, dict(shared, epochs=41))
    assert before != after and before["model"]["recurrent_kind"] == "locked" and before["model"]["cell"] == "equations"
    with pytest.raises(ValueError, match="not a variant"):
        lesson03.variant_changes("standard", shared)


@pytest.mark.parametrize("scale", ["cpu", "gpu"])
def test_lesson_08_uses_the_declared_word_lstm(scale):
    """Lesson 08's stored passes carry the word LSTM's name and settings in their keys: the same as 02b's."""
    model = lesson08.model_settings(scale)
    name = model.pop("name")
    assert (name, model) == word_lstm.word_lstm(scale)
    assert registry.settings(name, scale) == [model]


def test_the_word_lstm_belongs_to_lesson_02b(monkeypatch, tmp_path):
    assert registry.lesson_of("word-lstm") == registry.lesson_of("word-lstm-gpu") == "02b"
    assert registry.lesson_of("03-dropout") == "03" and registry.lesson_of("02b-char-lstm") == "02b"
    assert registry.lesson_of("08-dyneval") == "08" and registry.lesson_of("nothing") == ""
    assert all(registry.lesson_of(name) == reference.lesson_of(name) for name in registry.REGISTRY
               if not name.startswith("word-lstm"))  # the store's rule from the name agrees where a name has a lesson
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
