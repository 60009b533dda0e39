"""A lesson's code cells show what the lesson teaches: the plumbing (callbacks, figures of many runs, progress)
lives in the package, so no code cell defines a class, except an exercise's (a cell that uses the exercise
checks, ``lmcourse.course.exercises``)."""
import ast
import re
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))


def classes_outside_exercises(notebook: Path) -> list[str]:
    found = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or "exercises" in source:
            continue
        lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]  # IPython magics
        found += [f"cell {cell.get('id')}: class {n.name}" for n in ast.walk(ast.parse("\n".join(lines)))
                  if isinstance(n, ast.ClassDef)]
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_cell_defines_a_class(notebook):
    assert not classes_outside_exercises(notebook)


def test_the_check_finds_a_class(tmp_path):
    cells = [{"cell_type": "code", "id": "a", "source": ["class Plot:\n", "    pass\n"]},
             {"cell_type": "code", "id": "b", "source": ["from lmcourse.course.exercises import check\n",
                                                         "class Mine:\n", "    pass\n"]}]
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert classes_outside_exercises(path) == ["cell a: class Plot"]


def scale_branches(notebook: Path) -> list[str]:
    """Code lines that branch on the scale's name instead of a flag written once with ``by_scale``."""
    found = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code":
            found += [f"cell {cell.get('id')}: {ln.strip()}" for ln in "".join(cell["source"]).splitlines()
                      if re.search(r"\bSCALE\s*[!=]=", ln)]
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_lesson_cell_branches_on_the_scale_name(notebook):
    assert not scale_branches(notebook), "write the value once with by_scale(ci=..., cpu=..., gpu=...)"


def test_the_check_finds_a_scale_branch(tmp_path):
    cells = [{"cell_type": "code", "id": "a", "source": ["if SCALE == \"cpu\":\n", "    pass\n"]},
             {"cell_type": "code", "id": "b", "source": ["CLAIMS = by_scale(ci=False, cpu=True, gpu=True)\n"]}]
    path = tmp_path / "01_x.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    assert scale_branches(path) == ['cell a: if SCALE == "cpu":']
