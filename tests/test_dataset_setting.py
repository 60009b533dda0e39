"""LMCOURSE_DATASET is honoured, or a lesson says in its first cell that it reads another corpus and why (issue 37).

Every lesson prints ``catalog.corpus_note(lesson, DATASET)`` in its parameter cell. A lesson of
``catalog.HONOURS_DATASET`` loads the corpus the setting names. Any other lesson reads the setting nowhere but in
that note or in a printout: a corpus loaded, or a run or a number keyed by it, would make ``LMCOURSE_DATASET=ptb``
recompute the same thing under another name. A lesson's own constants (``L.DATASET`` of its runs module) are
not the setting. The checker is tried on small sources first, so that it can fail.
"""
import ast
import json
from pathlib import Path

import pytest

from lmcourse.course.catalog import CORPORA, HONOURS_DATASET

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9]*.ipynb"))
SHOWN = {"corpus_note", "print"}  # calls where the setting is only said, not used


def setting_reads(source: str) -> list[str]:
    """Every use of the setting (the name ``DATASET`` or ``config.DATASET``) outside a ``corpus_note(...)`` or
    ``print(...)`` call, as 'line N: text'."""
    tree = ast.parse(source)
    said = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) in SHOWN for inner in ast.walk(node)}
    lines = source.splitlines()
    return [f"line {node.lineno}: {lines[node.lineno - 1].strip()}" for node in ast.walk(tree)
            if ((isinstance(node, ast.Name) and node.id == "DATASET")
                or (isinstance(node, ast.Attribute) and node.attr == "DATASET"
                    and getattr(node.value, "id", None) == "config"))
            and id(node) not in said]


def code(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["\n".join(ln for ln in "".join(c["source"]).splitlines() if not ln.lstrip().startswith(("%", "!")))
            for c in cells if c["cell_type"] == "code"]


def test_the_checker_finds_a_corpus_or_a_run_keyed_by_the_setting():
    ok = 'from lmcourse.config import DATASET\nprint(corpus_note("05", DATASET))\nprint(f"dataset={DATASET}")\n'
    assert setting_reads(ok) == []
    assert setting_reads(ok + "corpus = load_corpus(DATASET)\n") == ["line 4: corpus = load_corpus(DATASET)"]
    assert len(setting_reads("run = train_or_load('x', s, f, v, dataset=config.DATASET)")) == 1
    assert setting_reads("run = L.train(s, dataset=L.DATASET)") == []  # the runs module's own constant


def test_every_lesson_is_named_in_the_catalog():
    ids = {p.name.split("_", 1)[0] for p in NOTEBOOKS}
    assert ids == set(HONOURS_DATASET) | set(CORPORA)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name.split("_", 1)[0])
def test_a_lesson_honours_the_setting_or_says_why_not(path):
    lesson, cells = path.name.split("_", 1)[0], code(path)
    assert any(f'corpus_note("{lesson}", DATASET)' in src for src in cells), \
        f"lesson {lesson} must print catalog.corpus_note({lesson!r}, DATASET) in its parameter cell"
    if lesson in HONOURS_DATASET:
        assert any("load_corpus(DATASET" in src for src in cells), f"lesson {lesson} must load the corpus it names"
        return
    found = [f"cell {i}, {hit}" for i, src in enumerate(cells) if "DATASET" in src for hit in setting_reads(src)]
    assert found == [], f"lesson {lesson} uses LMCOURSE_DATASET although its note says it reads another corpus: {found}"
