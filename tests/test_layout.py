"""The package's floors: a module imports only from its own subpackage and from the floors below it.

Floors, lowest first (``lmcourse/README.md`` gives the same table):

0. the base modules at the top level: ``errors``, ``config``, ``memory``, ``vocab``, ``lm``,
   ``literature``, ``progress``, ``checksum`` (and the package's ``__init__``);
1. ``corpora``;  2. ``ngram``, ``networks``;  3. ``training``, ``adapt``;  4. ``store``, ``widgets``;
5. ``course``;  6. the authoring tools, ``authoring``, and beside them the command line, ``cli``; 7. the top level's
``__main__``.

Every import counts, including those inside functions. A test below also breaks the rule on
purpose, so that the checker itself is known to catch it. No lesson reaches ``authoring`` through any chain of
imports (the lessons' own imports are read from the notebooks).
"""
import ast
import json
import re
from pathlib import Path
from typing import Optional

import pytest

import lmcourse

ROOT = Path(lmcourse.__file__).parent
BASE = {"__init__", "errors", "config", "memory", "vocab", "lm", "literature", "progress", "checksum"}
COMMAND_LINE = {"__main__"}
FLOORS = {"corpora": 1, "ngram": 2, "networks": 2, "training": 3, "adapt": 3, "store": 4, "widgets": 4,
          "course": 5, "authoring": 6, "cli": 6}
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


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(dotted: str, root: Path = ROOT) -> bool:
    parts = dotted.split(".")[1:]
    return root.joinpath(*parts).with_suffix(".py").exists() or root.joinpath(*parts).is_dir()


def _submodules(package: str, root: Path = ROOT) -> set[str]:
    """Every module of the package ``package`` (its files, not its subpackages' files)."""
    folder = root.joinpath(*package.split(".")[1:])
    return {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"} | \
           {f"{package}.{p.name}" for p in folder.iterdir() if (p / "__init__.py").is_file()}


def _resolve(name: str, package: list[str]) -> str:
    """An absolute dotted name for ``name``, relative (``.x``, ``..x``) to ``package`` when it starts with dots."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    base = package[:len(package) - level + 1]
    return ".".join(base + ([name[level:]] if name[level:] else []))


ANY = "\0"  # a piece of a module name known only at run time


class _Names(ast.NodeVisitor):
    """The names a module gives to ``importlib.import_module`` / ``__import__``, built at run time or not, and
    whether it walks packages (``pkgutil.iter_modules`` / ``walk_packages``).

    A name is read as a pattern: string constants, f-strings and ``+`` of strings are followed; ``__name__`` and
    ``__package__`` are the module's own; a variable bound to a string at the module's top level, or a parameter
    whose default is one, is read as that string; anything else is :data:`ANY`, a piece known only at run time."""

    def __init__(self, module: str, package: list[str], tree: ast.Module):
        self.module, self.package = module, package
        self.constants = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Name)}
        self.scopes: list[dict] = []
        self.calls: list[tuple[str, list[str]]] = []  # (pattern, anchor package)
        self.walks_own = False  # pkgutil over the module's own __path__
        self.visit(tree)

    def visit_FunctionDef(self, node):
        args = node.args.args + node.args.kwonlyargs
        defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + node.args.kw_defaults
        self.scopes.append({a.arg: d for a, d in zip(args, defaults)})
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def text(self, node) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(self.text(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.text(node.left) + self.text(node.right)
        if isinstance(node, ast.Name):
            if node.id == "__name__":
                return self.module
            if node.id == "__package__":
                return ".".join(self.package)
            for scope in reversed(self.scopes):
                if node.id in scope:
                    return ANY if scope[node.id] is None else self.text(scope[node.id])
            value = self.constants.get(node.id)
            if isinstance(value, ast.AST):
                return self.text(value)
        return ANY

    def visit_Call(self, node):
        called = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if called in ("import_module", "__import__") and node.args:
            anchor = self.package
            if len(node.args) > 1:
                anchor = self.text(node.args[1]).split(".")
            self.calls.append((self.text(node.args[0]), anchor))
        if called in ("iter_modules", "walk_packages") and node.args and getattr(node.args[0], "id", "") == "__path__":
            self.walks_own = True
        self.generic_visit(node)


def _matching(pattern: str, root: Path) -> Optional[set]:
    """The modules under ``root`` that ``pattern`` (with :data:`ANY` pieces) may name; None when it names no known
    package before its first unknown piece, so no checker could tell which modules it imports."""
    known = pattern.split(ANY, 1)[0]
    if not known.startswith(root.name + ".") and known != root.name:
        return None if ANY in pattern else set()
    if ANY not in pattern:
        return {pattern}
    regex = re.compile(".+".join(re.escape(piece) for piece in pattern.split(ANY)) + r"\Z")
    return {m for m in all_module_names(root) if regex.match(m)}


def runtime_imports(source: str, module: str, is_package: bool, root: Path = ROOT) -> tuple[set[str], list[str]]:
    """``(modules, unseen)``: the modules of ``root`` that ``source`` names at run time (``import_module``, package
    walks), and the names it builds that say no package before their unknown piece (which no checker can follow)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(source)
    names = _Names(module, package, tree)
    found, unseen = set(), []
    for pattern, anchor in names.calls:
        if pattern.startswith("."):
            pattern = _resolve(pattern, anchor)
        modules = _matching(pattern, root)
        if modules is None:
            unseen.append(pattern.replace(ANY, "{?}"))
        else:
            found |= modules
    walks = any(isinstance(n, ast.Attribute) and n.attr in ("iter_modules", "walk_packages") for n in ast.walk(tree))
    if walks:
        for text in {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}:
            if text.startswith(root.name + ".") and root.joinpath(*text.split(".")[1:]).is_dir():
                found |= {text} | _submodules(text, root)
    if names.walks_own and is_package:
        found |= _submodules(module, root)
    return found, unseen


def imports_of(source: str, module: str, is_package: bool, root: Path = ROOT) -> set[str]:
    """Every module of ``root``'s package that ``source`` imports, as absolute dotted names (relative ones resolved).

    Counted too: a module named to ``importlib.import_module`` or ``__import__`` (relative to ``__package__`` or
    to a package given by name), by a string or a name built at run time (an f-string, ``+``: see :class:`_Names`),
    and every module of a package walked with ``pkgutil.iter_modules`` / ``walk_packages``, which is how a
    registry finds its modules."""
    top = root.name
    package = module.split(".") if is_package else module.split(".")[:-1]
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == top}
        elif isinstance(node, ast.ImportFrom):
            target = _resolve("." * node.level + (node.module or ""), package)
            if target.split(".")[0] != top:
                continue
            # `from lmcourse.x import y` may name a module y: count it (and not x's __init__) when it is one.
            named = {f"{target}.{alias.name}" for alias in node.names}
            modules = {m for m in named if _is_module(m, root)}
            found |= modules if modules == named else modules | {target}
    return found | runtime_imports(source, module, is_package, root)[0]


def all_module_names(root: Path = ROOT) -> set[str]:
    return {module_name(p, root) for p in sorted(root.rglob("*.py"))}


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of ``root``'s package it imports, for every module of the package."""
    return {module_name(p, root): imports_of(p.read_text(encoding="utf-8"), module_name(p, root),
                                             p.name == "__init__.py", root)
            for p in sorted(root.rglob("*.py"))}


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
    ("lmcourse.course.rendered", "from ..authoring import slides", "lmcourse.authoring.slides"),
    ("lmcourse.store.stored_runs", "def f():\n    from lmcourse.authoring.lessons import lessons  # late",
     "lmcourse.authoring.lessons"),
    ("lmcourse.cli.notebooks", "from ..authoring.release import stamp", "lmcourse.authoring.release"),  # sideways
    ("lmcourse.authoring.lessons", "from ..cli.main import main", "lmcourse.cli.main"),  # sideways
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


def test_the_checker_catches_a_circle_through_an_f_string_import_module(tmp_path):
    """A synthetic package whose registry imports its plugins by an f-string name, and a plugin that imports the
    registry back: the circle is found (and it is the f-string's edge that closes it)."""
    pkg = tmp_path / "pkg"
    (pkg / "plugins").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plugins" / "__init__.py").write_text(
        "import importlib\n\n\ndef load(name):\n    return importlib.import_module(f'{__name__}.{name}')\n")
    (pkg / "plugins" / "alpha.py").write_text("from . import load\n")
    (pkg / "plugins" / "beta.py").write_text("X = 1\n")
    edges = graph(pkg)
    assert edges["pkg.plugins"] == {"pkg.plugins.alpha", "pkg.plugins.beta"}  # the f-string's modules
    assert circles(edges) == [["pkg.plugins", "pkg.plugins.alpha", "pkg.plugins"]]
    (pkg / "plugins" / "alpha.py").write_text("X = 2\n")  # the plugin no longer imports the registry back
    assert circles(graph(pkg)) == []


@pytest.mark.parametrize("source, seen", [
    ("import importlib\nP = 'lmcourse.course.runs'\ndef f(name, package=P):\n"
     "    importlib.import_module(f'{package}.{name}')", {"lmcourse.course.runs.lesson08"}),
    ("import importlib\ndef f(name):\n    importlib.import_module('lmcourse.networks.' + name)",
     {"lmcourse.networks.mos"}),
    ("from importlib import import_module\ndef f(name):\n    import_module(f'.{name}', __package__)",
     {"lmcourse.networks.mos"}),
])
def test_names_built_at_run_time_are_followed(source, seen):
    found, unseen = runtime_imports(source, "lmcourse.networks.models", is_package=False)
    assert seen <= found and not unseen, (found, unseen)


def test_every_name_built_at_run_time_says_its_package():
    """An import_module whose name says no package before its unknown part cannot be followed: none is left."""
    unseen = {module_name(p): runtime_imports(p.read_text(encoding="utf-8"), module_name(p), p.name == "__init__.py")[1]
              for p in all_modules()}
    assert not any(unseen.values()), {m: u for m, u in unseen.items() if u}
    assert runtime_imports("import importlib\ndef f(name):\n    importlib.import_module(name)", "lmcourse.lm",
                           False)[1] == ["{?}"]  # the check can fail


def imports_inside_functions_without_a_reason(source: str) -> list[str]:
    """The package's imports written inside a function whose line carries no comment (the reason it is there)."""
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                inner = isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("lmcourse"))
                inner = inner or isinstance(node, ast.Import) and any(a.name.startswith("lmcourse") for a in node.names)
                if inner and "#" not in lines[node.end_lineno - 1]:
                    found.append(f"line {node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_an_import_inside_a_function_says_why_on_its_line(path):
    found = imports_inside_functions_without_a_reason(path.read_text(encoding="utf-8"))
    assert not found, "imports inside functions without a reason: move them to the top, or say why:\n" + "\n".join(found)


def test_the_reason_checker_catches_a_bare_import_inside_a_function():
    assert imports_inside_functions_without_a_reason("def f():\n    from ..corpora import data\n") == [
        "line 2: from ..corpora import data"]
    assert imports_inside_functions_without_a_reason("def f():\n    from ..corpora import data  # slow\n") == []
    assert imports_inside_functions_without_a_reason("from ..corpora import data\n") == []


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


# ------------------------------------------------------------------ the student's code: no lesson reaches authoring

LESSONS = ROOT.parent / "notebooks"
AUTHORING = "lmcourse.authoring"


def lesson_imports(folder: Path = LESSONS) -> dict[str, set[str]]:
    """lesson file -> the package's modules its code imports directly: every code cell of each notebook (lines
    that are IPython magics or shell escapes left out) and each solution file."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")) + sorted((folder / "solutions").glob("*.py")):
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                       for c in cells if c["cell_type"] == "code"]
        else:
            sources = [path.read_text(encoding="utf-8")]
        modules = set()
        for source in sources:
            code = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
            modules |= imports_of(code, "lmcourse.lesson", is_package=False)
        found[path.name] = modules
    return found


def reached(start: set[str], edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """Every module reachable from ``start`` through ``edges``, with the chain of imports that reaches it."""
    chains = {m: [m] for m in start}
    todo = sorted(start)
    while todo:
        here = todo.pop()
        for nxt in sorted(edges.get(here, ())):
            if nxt not in chains:
                chains[nxt] = chains[here] + [nxt]
                todo.append(nxt)
    return chains


def authoring_reached(start: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The chains by which ``start`` reaches the authoring room (empty when none does)."""
    return [" -> ".join(chain) for module, chain in sorted(reached(start, edges).items())
            if module == AUTHORING or module.startswith(AUTHORING + ".")]


def test_no_lesson_reaches_the_authoring_room():
    imports = lesson_imports()
    lessons = [n for n in imports if n.endswith(".ipynb")]
    assert len(lessons) >= 11 and all(imports[n] for n in lessons), imports  # each lesson imports the package
    edges = graph()
    found = {name: authoring_reached(modules, edges) for name, modules in imports.items()}
    assert not any(found.values()), {name: chains for name, chains in found.items() if chains}


def test_the_authoring_check_catches_a_chain_through_the_course(tmp_path):
    """A lesson's import is read from its code cells (magics and shell lines left out, markdown ignored), and a chain
    from it into the authoring room is found through a module the lesson does not name."""
    cell = "%matplotlib inline\nfrom lmcourse.course.seeds import mean_sd\n!ls\n"
    nb = {"cells": [{"cell_type": "code", "source": cell}, {"cell_type": "markdown", "source": "import lmcourse.cli"}]}
    (tmp_path / "01_probe.ipynb").write_text(json.dumps(nb))
    imports = lesson_imports(tmp_path)
    assert imports == {"01_probe.ipynb": {"lmcourse.course.seeds"}}
    edges = {"lmcourse.course.seeds": {"lmcourse.course.catalog"}, "lmcourse.course.catalog": set()}
    assert authoring_reached(imports["01_probe.ipynb"], edges) == []
    edges["lmcourse.course.catalog"] = {"lmcourse.authoring.outputs"}
    assert authoring_reached(imports["01_probe.ipynb"], edges) == [
        "lmcourse.course.seeds -> lmcourse.course.catalog -> lmcourse.authoring.outputs"]


def _literal_exit_statuses(source: str) -> list:
    """Lines that return or exit with the Ctrl-C status written as the number 130 (not the package's name for it)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        value = node.value if isinstance(node, ast.Return) else (
            node.args[0] if isinstance(node, ast.Call) and node.args and getattr(node.func, "attr", "") in
            ("_exit", "exit") else None)
        if isinstance(value, ast.Constant) and value.value == 130:
            found.append(node.lineno)
    return found


def test_the_ctrl_c_status_has_one_home():
    """130 is written once, as ``lmcourse.EXIT_INTERRUPTED``; every command returns or exits with that name."""
    offenders = {str(p.relative_to(ROOT)): lines for p in sorted(ROOT.rglob("*.py"))
                 if (lines := _literal_exit_statuses(p.read_text()))}
    assert offenders == {}, f"write lmcourse.EXIT_INTERRUPTED instead of 130 at: {offenders}"
    assert lmcourse.EXIT_INTERRUPTED == 130
    assert _literal_exit_statuses("def f():\n    return 130\n") == [2]       # the checker sees both forms
    assert _literal_exit_statuses("import os\nos._exit(130)\n") == [2]
