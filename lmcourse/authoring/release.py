"""The course outside its repository: each lesson's set-up cell and licence footer.

A lesson runs in three places: a clone (``make lab``), a plain Jupyter where the course's wheel is installed, and
a hosted notebook service (Colab and the like) that has neither. So every lesson opens with :data:`SETUP_SOURCE`, a
code cell that installs the package when it cannot be imported and does nothing when it can, and closes with
:data:`FOOTER_SOURCE`, a markdown cell with the licences (the code under MIT, the lessons' text and figures under
CC BY 4.0). Both are stamped by one command, which keeps each notebook's metadata and the cells' ids (a new
cell gets a fresh one), gives both cells the slide type ``skip`` and no outputs, and can be re-run at any time::

    python -m lmcourse.authoring.release stamp [LESSON ...]    # write the set-up cell and the footer (idempotent)
    python -m lmcourse.authoring.release check [LESSON ...]    # status 1 when a lesson lacks either or differs

The package is not on the Python package index (the name ``lmcourse`` is not registered there, and a name
someone else could register is not one a lesson should install), so the set-up cell installs it from the
course's repository, :data:`SOURCE`, as an archive of its main branch: no git needed, no history downloaded.

Copying the lessons out (``python -m lmcourse notebooks DEST``) is a student's command, not an author's: it lives
below, in :func:`lmcourse.course.catalog.copy_lessons`.
"""
from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path
from typing import Optional, Sequence

from ..checksum import atomic_write
from ..course.catalog import check_writable, lessons
from ..errors import ConfigError

SOURCE = "https://github.com/lmcourse/lmcourse"  # the course's repository; pyproject.toml's [project.urls] Source
INSTALL_FROM = f"{SOURCE}/archive/refs/heads/main.zip"  # what the set-up cell installs where lmcourse is missing
SETUP_MARK = "# Set-up:"  # the first line of the set-up cell, by which it is found again
FOOTER_MARK = "<!-- lmcourse licence footer -->"

SETUP_SOURCE = f"""{SETUP_MARK} installs the course's package where it is missing (a hosted notebook service such as Colab),
# and does nothing where it is installed (a clone with `make lab`, or `pip install` of the course).
import importlib.util, subprocess, sys
if importlib.util.find_spec("lmcourse") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    "{INSTALL_FROM}"], check=True)
    importlib.invalidate_caches()"""

FOOTER_SOURCE = f"""{FOOTER_MARK}

---

*lmcourse*, an interactive course on neural language modelling. The text and figures of this lesson are
licensed under [CC BY 4.0](https://creativecommons.org/licenses/by/4.0/): share and adapt them, naming the
course. Its code, and the `lmcourse` package, are under the [MIT licence]({SOURCE}/blob/main/LICENSE).
To cite the course: [CITATION.cff]({SOURCE}/blob/main/CITATION.cff)."""


def _lines(text: str) -> list[str]:
    """A cell's source as nbformat stores it: one string per line, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _is_setup(cell: dict) -> bool:
    return cell.get("cell_type") == "code" and _text(cell).startswith(SETUP_MARK)


def _is_footer(cell: dict) -> bool:
    return cell.get("cell_type") == "markdown" and _text(cell).startswith(FOOTER_MARK)


def _fresh_id(nb: dict) -> str:
    taken = {c.get("id") for c in nb["cells"]}
    while True:
        new = uuid.uuid4().hex[:8]
        if new not in taken:
            return new


def _skip(cell: dict) -> None:
    cell.setdefault("metadata", {})["slideshow"] = {"slide_type": "skip"}


def stamp(nb: dict) -> bool:
    """Give the notebook ``nb`` (a dict in nbformat 4) the set-up cell first and the footer last, in place; True
    when anything changed. A cell already there keeps its id and metadata and gets today's text; a new one gets a
    fresh id, the slide type ``skip`` and no outputs."""
    before = json.dumps(nb, sort_keys=True)
    cells = nb["cells"]
    setup = next((c for c in cells if _is_setup(c)), None)
    if setup is None:
        setup = {"cell_type": "code", "execution_count": None, "id": _fresh_id(nb), "metadata": {}, "outputs": [],
                 "source": []}
    footer = next((c for c in cells if _is_footer(c)), None)
    if footer is None:
        footer = {"cell_type": "markdown", "id": _fresh_id(nb), "metadata": {}, "source": []}
    middle = [c for c in cells if c is not setup and c is not footer]
    setup["source"], footer["source"] = _lines(SETUP_SOURCE), _lines(FOOTER_SOURCE)
    setup["outputs"], setup["execution_count"] = [], None
    _skip(setup)
    _skip(footer)
    nb["cells"] = [setup, *middle, footer]
    return json.dumps(nb, sort_keys=True) != before


def problems(nb: dict) -> list[str]:
    """What keeps the notebook ``nb`` from opening anywhere: its first cell is not today's set-up cell, or its last
    is not today's footer (one sentence each; empty when both are right)."""
    found = []
    cells = nb.get("cells") or [{}]
    first, last = cells[0], cells[-1]
    if not (_is_setup(first) and _text(first) == SETUP_SOURCE):
        found.append("its first cell is not the set-up cell that installs lmcourse where it is missing")
    elif first.get("outputs") or first.get("metadata", {}).get("slideshow", {}).get("slide_type") != "skip":
        found.append("its set-up cell has outputs or is not skipped in the slides")
    if not (_is_footer(last) and _text(last) == FOOTER_SOURCE):
        found.append("its last cell is not the licence footer")
    elif last.get("metadata", {}).get("slideshow", {}).get("slide_type") != "skip":
        found.append("its licence footer is not skipped in the slides")
    return found


def _write_notebook(path: Path, nb: dict) -> None:
    """Write ``nb`` as nbformat writes it (one space of indent, a final newline), replacing the file whole."""
    atomic_write(path, json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def stamp_files(paths: Sequence[Path]) -> list[Path]:
    """Stamp each lesson file; the ones that changed."""
    check_writable(paths)
    changed = []
    for path in paths:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        if stamp(nb):
            _write_notebook(Path(path), nb)
            changed.append(Path(path))
    return changed


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.release", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("stamp", "check"),
                        help="stamp: write each lesson's set-up cell and footer; check: status 1 when one differs")
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    args = parser.parse_args(argv)
    try:
        paths = lessons(args.lessons)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.command == "stamp":
        try:
            changed = stamp_files(paths)
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        for path in changed:
            print(f"stamped {path.name}")
        return 0
    status = 0
    for path in paths:
        for problem in problems(json.loads(path.read_text(encoding="utf-8"))):
            print(f"{path.name}: {problem}: run python -m lmcourse.authoring.release stamp")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
