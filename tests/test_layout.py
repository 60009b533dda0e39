"""The package's floors: a module imports only from its own subpackage and from the floors below it.

Floors, lowest first (``lmcourse/README.md`` gives the same table):

0. the base modules at the top level: ``errors``, ``config``, ``memory``, ``vocab``, ``lm``,
   ``literature``, ``progress``, ``checksum`` (and the package's ``__init__``);
1. ``corpora``;  2. ``ngram``, ``networks``;  3. ``training``, ``adapt``;  4. ``store``, ``widgets``;
5. ``course``;  6. the command line: ``cli`` and the top level's ``__main__``.

Every import counts, including those inside functions. A test below also breaks the rule on
purpose, so that the checker itself is known to catch it.
"""
import ast
from pathlib import Path

import pytest

import lmcourse

ROOT = Path(lmcourse.__file__).parent
BASE = {"__init__", "errors", "config", "memory", "vocab", "lm", "literature", "progress", "checksum"}
COMMAND_LINE = {"__main__"}
FLOORS = {"corpora": 1, "ngram": 2, "networks": 2, "training": 3, "adapt": 3, "store": 4, "widgets": 4,
          "course": 5, "cli": 6}
TOP_FLOOR = max(FLOORS.values()) + 1


def room(module: str) -> tuple[str, int]:
    """The room (subpackage, or the top-level module's own name) and floor of a dotted module name."""
    parts = module.split(".")
    assert parts[0] == "lmcourse", module
    if len(parts) == 1:
        return "__init__", 0
    head = parts[1]
    if head in FLOORS:
        return head, FLOORS[head]
    if head in BASE:
        return head, 0
    if head in COMMAND_LINE:
        return head, TOP_FLOOR
    raise AssertionError(f"lmcourse.{head} is on no floor: add it to tests/test_layout.py and lmcourse/README.md.")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    return ROOT.joinpath(*parts).with_suffix(".py").exists() or ROOT.joinpath(*parts).is_dir()


def _submodules(package: str) -> set[str]:
    """Every module of the lmcourse package ``package`` (its files, not its subpackages' files)."""
    folder = ROOT.joinpath(*package.split(".")[1:])
    return {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"} | \
           {f"{package}.{p.name}" for p in folder.iterdir() if (p / "__init__.py").is_file()}


def _resolve(name: str, package: list[str]) -> str:
    """An absolute dotted name for ``name``, relative (``.x``, ``..x``) to ``package`` when it starts with dots."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    base = package[:len(package) - level + 1]
    return ".".join(base + ([name[level:]] if name[level:] else []))


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every lmcourse module that ``source`` imports, as absolute dotted names (relative ones resolved).

    Counted too: a module named by a string to ``importlib.import_module`` or ``__import__`` (relative to
    ``__package__`` or to a package given by name), and every module of a package named by a string in a
    module that walks packages (``pkgutil.iter_modules`` / ``walk_packages``), which is how a registry
    finds its modules."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(source)
    found = set()
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    walks = any(isinstance(n, ast.Attribute) and n.attr in ("iter_modules", "walk_packages") for n in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "lmcourse"}
        elif isinstance(node, ast.ImportFrom):
            target = _resolve("." * node.level + (node.module or ""), package)
            if target.split(".")[0] != "lmcourse":
                continue
            # `from lmcourse.x import y` may name a module y: count it (and not x's __init__) when it is one.
            named = {f"{target}.{alias.name}" for alias in node.names}
            modules = {m for m in named if _is_module(m)}
            found |= modules if modules == named else modules | {target}
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and getattr(node.func, "attr", getattr(node.func, "id", "")) \
                in ("import_module", "__import__"):
            anchor = package
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                anchor = node.args[1].value.split(".")
            target = _resolve(node.args[0].value, anchor)
            if target.split(".")[0] == "lmcourse":
                found.add(target)
    if walks:
        for text in strings:
            if text.startswith("lmcourse.") and ROOT.joinpath(*text.split(".")[1:]).is_dir():
                found |= {text} | _submodules(text)
    return found


def graph() -> dict[str, set[str]]:
    """module -> the lmcourse modules it imports, for every module of the package."""
    return {module_name(p): imports_of(p.read_text(encoding="utf-8"), module_name(p), p.name == "__init__.py")
            for p in all_modules()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``edges``: each as the list of modules around it (empty when there are none)."""
    found, state = [], {}  # state: 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if nxt == node:
                continue
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def violations(module: str, imported: set[str]) -> list[str]:
    here, floor = room(module)
    wrong = []
    for target in sorted(imported):
        there, other = room(target)
        if there == here or other < floor or floor == TOP_FLOOR:
            continue
        if floor == 0 and other == 0:  # the base modules may use each other
            continue
        wrong.append(f"{module} (floor {floor}) imports {target} (floor {other})")
    return wrong


def all_modules():
    return sorted(ROOT.rglob("*.py"))


def test_every_module_is_on_a_floor():
    for path in all_modules():
        room(module_name(path))


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_upward_or_sideways(path):
    module = module_name(path)
    imported = imports_of(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
    assert not violations(module, imported), "\n".join(violations(module, imported))


@pytest.mark.parametrize("module, source, culprit", [
    ("lmcourse.corpora.data", "from ..networks.models import RNNLM", "lmcourse.networks.models"),
    ("lmcourse.networks.loss", "def f():\n    from ..training import trainer", "lmcourse.training.trainer"),
    ("lmcourse.networks.models", "import lmcourse.widgets.cache_explorer", "lmcourse.widgets.cache_explorer"),
    ("lmcourse.adapt.cache", "from lmcourse.training.callbacks import ProgressBar", "lmcourse.training.callbacks"),
    ("lmcourse.ngram.model", "from ..networks import lstm", "lmcourse.networks.lstm"),
    ("lmcourse.lm", "from .corpora import data", "lmcourse.corpora.data"),
])
def test_the_checker_catches_an_upward_import(module, source, culprit):
    found = violations(module, imports_of(source, module, is_package=False))
    assert any(culprit in line for line in found), found


def test_a_downward_import_is_allowed():
    module = "lmcourse.training.trainer"
    source = "from ..networks.models import RNNLM\nfrom ..corpora import data\nfrom .. import config\nfrom . import optim"
    assert violations(module, imports_of(source, module, is_package=False)) == []


def test_no_import_circle():
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


@pytest.mark.parametrize("sources", [
    {"lmcourse.course.registry": "from .runs import lesson03",
     "lmcourse.course.runs.lesson03": "from ..registry import declare"},
    {"lmcourse.course.registry": "import importlib\nimportlib.import_module('lmcourse.course.runs.lesson03')",
     "lmcourse.course.runs.lesson03": "from lmcourse.course import registry"},
    {"lmcourse.course.registry": "from importlib import import_module\nimport_module('.runs.lesson03', __package__)",
     "lmcourse.course.runs.lesson03": "def f():\n    from ..registry import REGISTRY"},
    {"lmcourse.course.registry": "import importlib, pkgutil\nP = 'lmcourse.course.runs'\n"
                                 "for m in pkgutil.iter_modules(importlib.import_module(P).__path__): pass",
     "lmcourse.course.runs.lesson08": "from .. import registry"},
])
def test_the_checker_catches_an_import_circle(sources):
    """A circle made by plain imports, through importlib with a name or a relative name, or through a package walk."""
    edges = {m: imports_of(src, m, is_package=False) for m, src in sources.items()}
    assert circles(edges), edges


def test_the_run_registry_is_imported_by_none_of_its_modules():
    edges = graph()
    runs = {m for m in edges if m.startswith("lmcourse.course.runs.")}
    assert runs and runs <= edges["lmcourse.course.registry"]  # it finds every one of them
    assert not [m for m in runs if "lmcourse.course.registry" in edges[m]]


def test_at_most_eight_modules_at_the_top_level():
    top = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__"}
    assert len(top) <= 8 and top <= BASE, top



def _reads_the_global_scale(source: str) -> list[str]:
    """Where ``source`` reads the current scale: ``SCALE`` (imported or as ``config.SCALE``), ``config.scale()``, or
    ``by_scale`` without ``scale=``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and any(a.name in ("SCALE", "scale") for a in node.names):
            found.append(f"line {node.lineno}: imports the current scale")
        elif isinstance(node, ast.Attribute) and node.attr in ("SCALE", "scale") and \
                getattr(node.value, "id", "") == "config":
            found.append(f"line {node.lineno}: config.{node.attr}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "by_scale" \
                and not any(k.arg == "scale" for k in node.keywords):
            found.append(f"line {node.lineno}: by_scale without scale=")
    return found


@pytest.mark.parametrize("path", [p for p in all_modules() if p.parent.name in ("training", "store")],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_training_and_the_store_take_the_scale_as_an_argument(path):
    assert not _reads_the_global_scale(path.read_text(encoding="utf-8")), _reads_the_global_scale(path.read_text())


def test_the_scale_checker_catches_a_global_read():
    assert len(_reads_the_global_scale("from .. import config\nx = config.SCALE\ny = by_scale(1, 2, 3)\n"
                                       "from ..config import SCALE\n")) == 3
    assert _reads_the_global_scale("y = by_scale(1, 2, 3, scale=s)\n") == []
