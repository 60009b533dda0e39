"""The lessons run on CUDA: no code cell turns a tensor into NumPy except through ``lmcourse.config.host``.

``t.numpy()`` raises on a CUDA tensor, so a lesson that calls it works on the CPU and breaks on the first
GPU machine. A static reading of every code cell keeps the one helper the only way out of the device.
"""
import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


def code_cells(path: Path):
    """``(index, source)`` of each code cell, IPython's magics and shell lines blanked so ``ast`` reads them."""
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            yield i, "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.split("\n"))


def numpy_calls(source: str) -> list:
    """The receivers of every ``X.numpy()`` call in ``source``."""
    return [ast.get_source_segment(source, node.func.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy"]


def test_the_static_check_sees_a_numpy_call():
    assert numpy_calls("a = np.sort(t.cpu().numpy())\nb = host(t)") == ["t.cpu()"]
    assert numpy_calls("ax.imshow(host(t))") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_lesson_calls_numpy_on_a_tensor(path):
    found = [(i, recv) for i, src in code_cells(path) for recv in numpy_calls(src)]
    assert not found, (f"{path.name}: cell {found[0][0]} calls {found[0][1]}.numpy(), which raises on a CUDA tensor: "
                       f"write host({found[0][1]}) (from lmcourse.config import host) instead.")


def test_there_are_lessons_to_check():
    assert len(NOTEBOOKS) >= 10
