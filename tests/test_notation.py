"""The course's one notation: the docs page is the module written out, one symbol per quantity, one sign for a
change, one corpus card, and the floors the page explains are the ones the corpora give."""
import json
from types import SimpleNamespace

import pytest
import torch

from lmcourse.course import notation, seeds
from lmcourse.course.notation import MINUS, change, difference, relative_change


def test_the_docs_page_is_the_module_written_out():
    assert notation.PAGE.read_text(encoding="utf-8") == notation.page(), (
        "docs/notation.md differs from lmcourse/course/notation.py: run "
        "python -m lmcourse.course.notation page > docs/notation.md")


def test_one_symbol_per_quantity():
    written = [s.tex for s in notation.symbols()]
    assert len(written) == len(set(written)), sorted(t for t in written if written.count(t) > 1)
    meanings = [s.means for s in notation.symbols()]
    assert len(meanings) == len(set(meanings))
    for tex in ("\\theta", "\\lambda", "\\rho", "\\varphi", "\\omega"):
        assert tex in written, f"{tex} has no entry"
    cache = {s.tex: s.means for s in notation.symbols()}
    assert "interpolation" in cache["\\lambda"] and "sharpness" in cache["\\theta"] and "decay" in cache["\\rho"]


@pytest.mark.parametrize("new, old, text", [(20.78, 21.38, f"{MINUS}2.8%"), (21.38, 20.78, "+2.9%"),
                                            (20.0, 20.0, "0.0%"), (20.0 - 1e-6, 20.0, "0.0%"),
                                            ([20.6, 20.9, 20.85], [21.3, 21.5, 21.34], f"{MINUS}2.8%")])
def test_a_change_is_new_against_old_negative_better(new, old, text):
    assert change(new, old) == text


def test_a_change_of_seeds_is_the_gap_of_their_means():
    new, old = [20.6, 20.9, 20.85], [21.3, 21.5, 21.34]
    assert relative_change(new, old) == pytest.approx(seeds.gap(new, old))
    assert change(16.29, 16.14, digits=2) == "+0.93%"
    assert difference(2.95, 2.981) == f"{MINUS}0.031 nats" and difference(1, 0.5, unit="bits", digits=1) == "+0.5 bits"


@pytest.mark.parametrize("new, old, match", [(20.0, 0.0, "positive"), (20.0, -3.0, "positive"),
                                             (float("nan"), 20.0, "finite"), ([], 20.0, "empty list")])
def test_a_change_that_means_nothing_is_refused(new, old, match):
    with pytest.raises(ValueError, match=match):
        change(new, old)


def _corpus(name):
    vocab = type("Vocab", (), {"__len__": lambda self: 1599})()
    return SimpleNamespace(name=name, train=torch.zeros(40011), valid=torch.zeros(10014), test=torch.zeros(10003),
                           vocab=vocab)


def test_the_corpus_card_is_four_lines_naming_each_split(capsys):
    notation.corpus_card(_corpus("embedded-2017-7a760ccc95"), {"valid": 13.4167, "test": 13.318},
                         what="the course model's variant")
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["corpus      embedded-2017-7a760ccc95: the course model's variant",
                     "tokens      train 40,011 · valid 10,014 · test 10,003",
                     "vocabulary  1,599 words",
                     "floor       the oracle (exact; no model beats it on average): valid 13.42 · test 13.32"]
    real = notation.card_text(_corpus("ptb"), {"test": 141.2})
    assert real.splitlines()[-1] == "baseline    the KN5 baseline (real text has no oracle): test 141.20"
    with pytest.raises(ValueError, match="not a split"):
        notation.card_text(_corpus("ptb"), {"dev": 1.0})


def test_the_course_models_floor_is_the_one_the_page_explains():
    from lmcourse.course.runs import course_model as CM

    params = CM.ladder_params("cpu")
    corpus = CM.ladder_corpus(params)
    floor = notation.floor_of(corpus, params)
    shown = next(f for f in notation.FLOORS if f.shown == "13.32")
    assert f"{floor['test']:.2f}" == shown.shown and f"validation: {floor['valid']:.2f}" in shown.split
    assert f"{len(corpus.test):,} tokens" in shown.split and f"{len(corpus.vocab):,} words" in shown.variant


def test_renames_list_the_cells_that_still_use_another_meaning(tmp_path):
    cells = [{"cell_type": "markdown", "id": "a1", "metadata": {}, "source": "The decay: $\\theta \\leftarrow \\theta "
              "- \\eta g + \\lambda\\,(\\theta_0 - \\theta)$."},
             {"cell_type": "markdown", "id": "a2", "metadata": {}, "source": "The cache: $\\theta$ and $\\lambda$."}]
    path = tmp_path / "08_demo.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found = notation.renames([path])
    assert {(hit["cell"], hit["rename"].split(" ")[0]) for hit in found} == {(0, "θ"), (0, "λ")}
    assert notation.renames([path.rename(tmp_path / "07_demo.ipynb")]) == [], "in lesson 07 θ and λ are the cache's"
