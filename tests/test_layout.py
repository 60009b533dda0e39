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


def imports_of(source: str, module: str, is_package: bool) -> set[str]:
    """Every lmcourse module that ``source`` imports, as absolute dotted names (relative ones resolved)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "lmcourse"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "lmcourse":
                continue
            found.add(target)
            # `from lmcourse.x import y` may name a module y: count it too when it is one.
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                parts = candidate.split(".")[1:]
                if (ROOT.joinpath(*parts).with_suffix(".py").exists() or ROOT.joinpath(*parts).is_dir()):
                    found.add(candidate)
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
