"""The lessons run on CUDA: no code cell turns a tensor into NumPy except through ``lmcourse.config.host``.

``t.numpy()`` raises on a CUDA tensor, so a lesson that calls it works on the CPU and breaks on the first
GPU machine. A static reading of every code cell keeps the one helper the only way out of the device.

A second reading catches a tensor made on the CPU meeting one that may be on the GPU: a mask built with
``torch.arange``/``torch.ones``/... without ``device=`` handed to ``masked_fill`` of a tensor from elsewhere
(lesson 09's cache by hand, issue 29 fault 2), or such a tensor compared with ``torch.allclose``/``equal``/
``isclose`` against one from elsewhere (lesson 06's row sums, which failed on an H100). A name assigned from a
device-less factory, or from a ``torch.nn`` module built in the cell and never moved, is on the host; so is any
name assigned from one of those.
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


FACTORIES = {"arange", "ones", "zeros", "full", "tensor", "eye", "empty", "rand", "randn", "randint", "linspace"}


def _deviceless(node) -> bool:
    """``torch.<factory>(...)`` without ``device=``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FACTORIES
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
            and not any(k.arg == "device" for k in node.keywords))


def _on_the_host(expr, host_names: set) -> bool:
    """True when ``expr`` is surely on the CPU: it uses a device-less factory, a ``torch.nn`` module built here or
    a name known to be on the host, and moves nothing with ``.to``/``.cuda``."""
    nodes = list(ast.walk(expr))
    moves = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("to", "cuda")]
    if moves:
        return False
    return any(_deviceless(n) or (isinstance(n, ast.Call) and ast.unparse(n.func).startswith("torch.nn."))
               or (isinstance(n, ast.Name) and n.id in host_names) for n in nodes)


def device_mixes(source: str) -> list:
    """Each ``masked_fill`` whose mask is on the host while its tensor may not be, and each ``torch.allclose``/
    ``equal``/``isclose`` with one side on the host and the other perhaps not."""
    tree = ast.parse(source)
    host_names: set = set()
    for _ in range(3):  # assignments that read host names are on the host too
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _on_the_host(node.value, host_names):
                host_names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) >= 1):
            continue
        if node.func.attr in ("masked_fill", "masked_fill_"):
            pair = node.args[0], node.func.value
            if _on_the_host(pair[0], host_names) and not _on_the_host(pair[1], host_names):
                found.append(ast.get_source_segment(source, node))
        elif (node.func.attr in ("allclose", "equal", "isclose") and ast.unparse(node.func.value) == "torch"
              and len(node.args) >= 2
              and _on_the_host(node.args[0], host_names) != _on_the_host(node.args[1], host_names)):
            found.append(ast.get_source_segment(source, node))
    return found


def test_the_device_check_sees_the_two_faults_found_on_a_gpu():
    cache_by_hand = ("t, i = torch.arange(T).view(-1, 1), torch.arange(T).view(1, -1)\n"
                     "visible = (i < t) & (i >= t - W)\ns = (theta * h @ h.t()).masked_fill(~visible, -1e9)")
    assert device_mixes(cache_by_hand) == ["(theta * h @ h.t()).masked_fill(~visible, -1e9)"]
    assert device_mixes(cache_by_hand.replace("arange(T)", "arange(T, device=h.device)")) == []
    row_sums = "ok = torch.allclose(by_type.sum(1), torch.ones(len(names)), atol=1e-5)"
    assert device_mixes(row_sums) == ["torch.allclose(by_type.sum(1), torch.ones(len(names)), atol=1e-5)"]
    assert device_mixes(row_sums.replace("torch.ones(len(names))", "torch.ones_like(by_type[:, 0])")) == []
    on_the_cpu = "toy = torch.nn.Embedding(9, 4)\ne = toy(ids)\nm = torch.zeros(9)\nok = torch.equal(m[:4], e[0])"
    assert device_mixes(on_the_cpu) == []  # both made here, both on the CPU


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_lesson_mixes_a_host_tensor_with_a_device_one(path):
    found = [(i, call) for i, src in code_cells(path) for call in device_mixes(src)]
    assert not found, (f"{path.name}: cell {found[0][0]} runs {found[0][1]}, where a tensor made on the CPU meets one "
                       "that may be on the GPU: make it with device=... (or *_like) beside the other.")


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
