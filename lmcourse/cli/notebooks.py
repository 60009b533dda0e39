"""The ``notebooks`` command: the lessons and their solutions copied from the installed package into a folder of
the user's own (:func:`lmcourse.course.catalog.copy_lessons`), where Jupyter can open and change them."""
from __future__ import annotations

from pathlib import Path


def add_cli(subparsers) -> None:
    """Add the ``notebooks`` subcommand."""
    p = subparsers.add_parser("notebooks", help="copy the lessons (and their solutions) into a folder")
    p.add_argument("dest", type=Path, help="the folder to copy them into (made if it does not exist)")
    p.add_argument("--force", action="store_true", help="replace lesson files the folder already holds")
    p.set_defaults(run=run_cli)


def run_cli(args) -> list:
    """Copy the lessons; print how many and where, and how to open them."""
    from ..course.catalog import copy_lessons  # loaded only when this command runs: it reads the course folder, which the other commands never need

    written = copy_lessons(args.dest, force=args.force)
    lessons = [p for p in written if p.suffix == ".ipynb"]
    print(f"copied {len(lessons)} lessons and {len(written) - len(lessons)} solution files into {args.dest}; "
          f"open them with: jupyter lab {args.dest}")
    return written
