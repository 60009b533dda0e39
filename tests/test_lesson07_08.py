"""Lessons 07 and 08 read the course model's corpus (and Penn Treebank) whatever LMCOURSE_DATASET says, and say so:
their stored runs and numbers are keyed by the corpus they read, so setting LMCOURSE_DATASET=ptb never makes them
retrain or recompute what is committed; and each lesson's parameter cell prints the one sentence about its corpus."""
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmcourse import config
from lmcourse.course import catalog
from lmcourse.course.runs import course_model, lesson08
from lmcourse.store import reference_runs as reference
from lmcourse.store.stored_runs import run_key

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture
def ptb_set(monkeypatch):
    """LMCOURSE_DATASET=ptb, as the lessons read it (config.DATASET)."""
    monkeypatch.setattr(config, "DATASET", "ptb")


def test_lesson_08_keys_its_passes_and_halves_by_the_corpus_they_read(monkeypatch, ptb_set):
    seen = []
    corpus = SimpleNamespace(vocab="vocab")
    run = SimpleNamespace(model=SimpleNamespace(to=lambda device: SimpleNamespace(eval=lambda: "model")))
    monkeypatch.setattr(lesson08, "course_model", lambda rung, seed, scale: (run, corpus))

    def stored(name, settings, compute, vocab, *, scale, dataset, recompute=None):
        seen.append((name, dataset))
        return {"json": json.dumps({"grids": {}}), "loaded": True}

    monkeypatch.setattr(lesson08, "compute_or_load", stored)
    lesson08.stored_passes(0, "cpu")
    lesson08.stored_halves(0, "cpu")
    lesson08.stored_cache(0, "cpu")
    assert seen == [(lesson08.NAME, "embedded"), (lesson08.NAME, "embedded"), (lesson08.HALVES, "embedded"),
                    (lesson08.NAME, "embedded"), (lesson08.CACHED, "embedded")]
    assert lesson08.DATASET == config.EMBEDDED


def test_the_course_model_is_keyed_by_its_own_corpus_whatever_the_setting(monkeypatch, ptb_set):
    seen = {}
    monkeypatch.setattr(course_model, "ladder_corpus", lambda params: SimpleNamespace(vocab="vocab"))
    monkeypatch.setattr(course_model, "train_rung", lambda settings, corpus, **kw: seen.update(kw) or "run")
    assert course_model.course_model("AWD recipe", 0, "ci") == ("run", SimpleNamespace(vocab="vocab"))
    assert seen["dataset"] == config.EMBEDDED and seen["scale"] == "ci"


def test_the_committed_passes_are_found_under_the_key_the_lesson_asks_for():
    """What stored_passes asks for at cpu (the corpus it reads, not LMCOURSE_DATASET's) is committed: nothing is
    recomputed, and nothing had to be re-keyed."""
    shared = course_model.shared_settings("cpu")
    corpus = course_model.ladder_corpus(course_model.ladder_params("cpu"))
    for seed in lesson08.SEEDS:
        for name, settings in ((lesson08.NAME, lesson08.pass_settings(seed, "cpu")),
                               (lesson08.HALVES, lesson08.halves_settings(seed, "cpu")),
                               (lesson08.CACHED, lesson08.cache_settings(seed, "cpu"))):
            key = run_key(name, settings, corpus.vocab, "cpu", lesson08.DATASET)
            assert reference.entry_for(name, key) is not None, f"{name} of seed {seed} is not committed under {key}"
        run = course_model.rung_settings(lesson08.RUNG, seed, shared)
        key = run_key(course_model.NAME, run, corpus.vocab, "cpu", config.EMBEDDED)
        assert reference.entry_for(course_model.NAME, key) is not None


def test_the_stored_cache_over_the_static_model_is_lesson_09s_search_and_the_adapting_one_gets_its_own():
    """with_cache's static half is lesson 09's cache search on the same validation pass, then its test perplexity;
    its dynamic half tunes its own theta and lambda over the same grid, on the adapting model's pass."""
    from lmcourse.adapt.cache_tuning import collect
    from lmcourse.course.runs import lesson09
    from lmcourse.lm import perplexity_from_nll
    found, run, corpus = lesson08.stored_passes(0, "ci", progress=False)
    model = run.model.eval()
    got = json.loads(lesson08.with_cache(model, corpus, found["summary"], lesson08.grids("ci"), progress=False)["json"])
    best = lesson09.best_cache(collect(model, corpus.valid, progress=False))
    assert (got["static"]["theta"], got["static"]["lam"]) == (best["theta"], best["lam"])
    by_hand = lesson09.cached(collect(model, corpus.test, progress=False), best)  # (N,) log-probabilities
    assert got["static"]["test"] == pytest.approx(perplexity_from_nll(-float(by_hand.double().mean())), rel=1e-6)
    grid = course_model.CACHE_GRID
    assert got["dynamic"]["theta"] in grid["thetas"] and got["dynamic"]["lam"] in grid["lams"]
    assert got["dynamic"]["valid"] > 1 and got["dynamic"]["test"] > 1


@pytest.mark.parametrize("lesson, stem", [("07", "07_neural_cache"), ("08", "08_dynamic_evaluation")])
def test_the_parameter_cell_prints_which_corpus_the_lesson_reads(lesson, stem):
    nb = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    params = next(s for s in sources if "CLAIMS = by_scale(" in s)
    assert f'catalog.corpus_note("{lesson}", DATASET)' in params
    assert "Penn Treebank" in catalog.corpus_note(lesson, "ptb") and "whatever LMCOURSE_DATASET" in \
        catalog.corpus_note(lesson, "ptb")
    # no stored run or number of the lesson is keyed by LMCOURSE_DATASET's corpus
    assert not any("dataset=DATASET" in s for s in sources)


class _PendingPTB:
    """ptb_model as a lesson sees it at cpu before the PTB runs are stored: the corpus loads, pending says why not,
    and anything that would read, train or score fails the test."""

    RUNG = "+ dropouts and tying"

    def __init__(self, why):
        self.why = why

    def load(self, level="word"):
        return SimpleNamespace(vocab=["<eos>"])

    def pending(self, scale, corpus):
        assert scale == "cpu" and corpus is not None
        return self.why

    def __getattr__(self, name):  # numbers, train, tokens, grids, settings, regime ...
        raise AssertionError(f"the skipped PTB section called ptb_model.{name}")


@pytest.mark.parametrize("stem", ["07_neural_cache", "08_dynamic_evaluation"])
def test_the_ptb_section_is_skipped_with_one_sentence_while_its_runs_are_pending(stem, capsys):
    """Every code cell of the PTB section, from its ptb_model.load() to the next markdown section, runs without error
    and without touching ptb_model beyond load and pending when pending gives a reason; the reason is printed, and
    each titled part of the section prints it too."""
    cells = json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    start = next(k for k, c in enumerate(cells) if c["cell_type"] == "code" and "ptb_model.load()" in "".join(c["source"]))
    assert "ptb_model.pending(SCALE, PTB)" in "".join(cells[start]["source"])
    end = next(k for k in range(start + 1, len(cells)) if "".join(cells[k]["source"]).startswith(("## Exercises",
                                                                                                  "## What to take")))
    why = "The Penn Treebank section is skipped at 'cpu': its runs are not stored yet."
    namespace = {"SCALE": "cpu", "ptb_model": _PendingPTB(why)}
    slides_with_code = 0
    for k in range(start, end):
        source = "".join(cells[k]["source"])
        if cells[k]["cell_type"] == "markdown":
            slides_with_code += source.startswith("## ")  # each titled part of the section, on the path or off it
            continue
        exec(compile(source, f"{stem} cell {k}", "exec"), namespace)
    assert namespace["why_not"] == why
    assert capsys.readouterr().out.count(why) == 1 + slides_with_code
    # and every later cell that reads the section's numbers is guarded by the same sentence
    for c in cells[end:]:
        source = "".join(c["source"])
        if c["cell_type"] == "code" and ("ptb_" in source or "PTB" in source):
            assert "why_not" in source, source[:200]
