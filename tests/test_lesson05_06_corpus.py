"""Lessons 05 and 06 read the embedded corpus (and its lookup-rich variant) whatever LMCOURSE_DATASET says.

So each must say so in its parameter cell (``catalog.corpus_note``), and no other code of theirs may read
``DATASET``: a corpus loaded or a run keyed by it would make ``LMCOURSE_DATASET=ptb`` recompute the same
thing under another name (issue 37). The checker is tried on small sources first, so that it can fail.
"""
import ast
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LESSONS = {"05": "05_softmax_bottleneck.ipynb", "06": "06_mixture_of_softmaxes.ipynb"}


def dataset_reads(source: str) -> list[str]:
    """Every read of ``DATASET`` (the name or ``<module>.DATASET``) in ``source`` other than as an argument of
    ``corpus_note(...)``, as 'line N: text'."""
    tree = ast.parse(source)
    allowed = {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
               and getattr(node.func, "id", getattr(node.func, "attr", None)) == "corpus_note" for arg in node.args}
    lines = source.splitlines()
    return [f"line {node.lineno}: {lines[node.lineno - 1].strip()}" for node in ast.walk(tree)
            if ((isinstance(node, ast.Name) and node.id == "DATASET")
                or (isinstance(node, ast.Attribute) and node.attr == "DATASET"))
            and id(node) not in allowed]


def code_cells(lesson: str) -> list[str]:
    nb = json.loads((REPO / "notebooks" / LESSONS[lesson]).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_the_checker_finds_a_corpus_or_a_run_keyed_by_DATASET():
    ok = 'from lmcourse.config import DATASET\nprint(corpus_note("05", DATASET))\n'
    assert dataset_reads(ok) == []
    assert dataset_reads(ok + "corpus = load_corpus(DATASET)\n") == ["line 3: corpus = load_corpus(DATASET)"]
    assert len(dataset_reads("run = train_or_load('x', s, f, v, dataset=config.DATASET)")) == 1
    assert len(dataset_reads('print(corpus_note("05", "ptb"), DATASET)')) == 1    # beside the call, not in it


@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_the_lesson_prints_its_corpus_note_and_reads_DATASET_nowhere_else(lesson):
    cells = code_cells(lesson)
    assert any(f'corpus_note("{lesson}", DATASET)' in src for src in cells), \
        f"lesson {lesson}'s parameter cell must print corpus_note({lesson!r}, DATASET)"
    found = [f"cell {i}, {hit}" for i, src in enumerate(cells) if "DATASET" in src for hit in dataset_reads(src)]
    assert found == [], f"lesson {lesson} reads LMCOURSE_DATASET's corpus name outside its corpus note: {found}"
