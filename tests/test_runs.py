"""The stored runs of lessons 03 and 06 and of the course model (which lesson 04 reads): declared once, shared, owned by their lesson;
the word LSTM of the command line, kept in the user's cache only."""
import pytest

from lmcourse import config
from lmcourse.course import registry
from lmcourse.course.runs import course_model, lesson03, lesson06, word_lstm
from lmcourse.course.runs import lesson08
from lmcourse.store import reference_runs as reference
from lmcourse.store import stored_numbers

AT = dict(scale="cpu", dataset="embedded")  # the key parts the store is given (it reads no global)


@pytest.mark.parametrize("scale", config.SCALES)
def test_the_declarations_are_built_from_the_course_model(scale):
    from lmcourse.course.runs import course_model

    shared = lesson03.lesson_shared(scale)
    course = course_model.shared_settings(scale)
    assert {k for k in shared if shared[k] != course[k]} == {"emb_size", "hidden_size", "epochs"}  # sizes, schedule
    assert shared["emb_size"] == max(1, course["emb_size"] // lesson03.NARROW)
    assert shared["hidden_size"] == lesson03.WIDTH * shared["emb_size"]
    assert shared["epochs"] == lesson03.LONGER * course["epochs"] > course["epochs"]
    dropout = registry.settings("03-dropout", scale)
    assert dropout == [lesson03.variant_settings(v, seed, shared) for seed in course_model.SEEDS
                       for v in lesson03.VARIANTS]
    assert len(dropout) == 8 * len(course_model.SEEDS)
    for s in dropout:  # each variant is its rung's settings with a change to the model dict only
        rung = course_model.rung_settings(s["rung"], s["seed"], shared)
        assert {k: v for k, v in s.items() if k not in ("model", "variant")} == {k: v for k, v in rung.items() if k != "model"}
        assert (s["model"] == rung["model"]) == (s["variant"] in lesson03.RUNGS)


def test_a_changed_course_model_gives_other_settings():
    from lmcourse.course.runs import course_model

    shared = lesson03.lesson_shared("cpu")
    before = lesson03.variant_settings(lesson03.BRANCHES[1], 0, shared)
    after = lesson03.variant_settings(lesson03.BRANCHES[1], 0, dict(shared, epochs=41))
    assert before != after and before["model"]["recurrent_kind"] == "locked" and before["model"]["cell"] == "equations"
    with pytest.raises(ValueError, match="not a variant"):
        lesson03.variant_changes("standard", shared)


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


def test_runs_belong_to_their_lessons(monkeypatch, tmp_path):
    assert "word-lstm" not in registry.REGISTRY and registry.lesson_of("word-lstm") == ""  # no lesson stores it
    assert registry.lesson_of("course-model") == "09" and registry.lesson_of("02b-char-lstm") == "02b"
    assert registry.lesson_of("03-dropout") == "03" and registry.lesson_of("06-mos-d4-k4-seed2") == "06"
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
    from lmcourse.authoring import lessons
    (tmp_path / "01_a.ipynb").write_text('{"cells": [{"source": "print(1)"}]}')
    (tmp_path / "03_c.ipynb").write_text('{"cells": [{"source": "print(2)"}]}')
    assert [p.name for p in lessons.with_runs(lessons.lessons(folder=tmp_path))] == ["03_c.ipynb"]
    real = [lessons.lesson_id(p) for p in lessons.with_runs(lessons.lessons())]
    assert real == ["02b", "03", "05", "06", "08", "09", "10"]  # 04 reads the course model (lesson 09's runs)


def test_the_word_lstm_is_kept_in_the_users_cache_only(monkeypatch, tmp_path):
    """Even while ``make runs`` stores reference runs, the word LSTM lands in the user's cache alone, and loads from it."""
    from lmcourse.corpora.data import load_corpus

    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(tmp_path / "reference"))
    monkeypatch.setenv(reference.STORE_ENV, "1")
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    name, settings = word_lstm.word_lstm("cpu")
    small = dict(settings, emb_size=8, hidden_size=8, train_tokens=700, epochs=1)  # the cpu recipe, tiny
    monkeypatch.setattr(word_lstm, "word_lstm", lambda scale=None: (name, small))
    corpus = load_corpus("embedded")
    corpus.valid = corpus.valid[:300]
    first = word_lstm.train(corpus, "cpu", "embedded", progress=False, live_plot=False)
    assert not first.loaded and first.path.parent == tmp_path / "cache" / "runs" and first.path.name.startswith(name + "-")
    assert not (tmp_path / "reference").exists() or not reference.read_manifest(tmp_path / "reference")
    again = word_lstm.train(corpus, "cpu", "embedded", progress=False, live_plot=False)
    assert again.loaded and again.path == first.path and len(again.history) == 1


def test_the_command_line_reaches_the_word_lstm_through_its_function(capsys):
    from lmcourse.cli.main import build_parser

    args = build_parser().parse_args(["word-lstm", "--scale", "cpu"])
    assert args.run.__module__ == "lmcourse.cli.word_lstm" and args.scale == "cpu"
    import inspect
    assert "word_lstm.train(" in inspect.getsource(args.run)


@pytest.mark.parametrize("scale", config.SCALES)
def test_lesson_06_declares_the_runs_it_trains(scale):
    """Each declared run of lesson 06 is a softmax or a mixture of the lesson's d, keyed by the corpus variant's fields."""
    k = lesson06.knobs(scale)
    names = [lesson06.run_name(h, s, k) for h in lesson06.HEADS for s in k["seeds"]]
    assert sorted(names) == sorted(lesson06.RUNS) and len(set(names)) == 2 * len(k["seeds"])
    for name in names:
        (settings,) = registry.settings(name, scale)
        assert settings["model"]["head_size"] == k["d"] and settings["valid_tokens"] == k["curve_tokens"]
        assert settings["model"]["n_experts"] == (1 if "-softmax-" in name else k["n_experts"])
        assert settings["corpus"]["train_tokens"] == k["train_tokens"] and settings["train"]["epochs"] == k["epochs"]
    with pytest.raises(ValueError, match="heads"):
        lesson06.run_name("cache", 0, k)


def test_lesson_02b_reads_the_course_models_lstm_rung():
    """The word model of 02b is the course model's first rung: no dropout, untied, its seeds committed."""
    settings = course_model.rung_settings("LSTM", 0, course_model.shared_settings("cpu"))
    assert settings["model"] == dict(tie=False) and settings["train"] == {}
    assert registry.settings("course-model", "cpu").count(settings) == 1


def test_the_word_lstm_has_one_recipe_at_every_scale():
    """Issue 29, fault 4: one stored-run name had trained with locked dropout in one lesson and standard in another.
    Now one function declares it: standard dropout at one rate, the same kind at every scale."""
    kinds = set()
    for scale in config.SCALES:
        name, settings = word_lstm.word_lstm(scale)
        cfg = word_lstm.model_config(settings, 100)
        assert cfg.dropouth == cfg.dropouti == settings["dropout"]
        kinds.add(cfg.dropout_kind)
    assert kinds == {"standard"}
