"""The lessons run headless: executed by a Jupyter kernel exactly as Run All would, outside a browser.

Two uses, both from the command line (and from the Makefile)::

    python -m lmcourse.course.lessons warm [--scale cpu] [LESSON ...]     # make warm
    python -m lmcourse.course.lessons store [--scale cpu] [LESSON ...]    # make lessons
    python -m lmcourse.course.lessons runs [LESSON ...]                   # make runs

``warm`` executes every lesson at the scale (default ``$LMCOURSE_SCALE``, else ``cpu``) and throws the
outputs away: a lesson trains each of its long runs the first time and stores it (see
:mod:`lmcourse.store.stored_runs`), so after ``warm`` a Run All loads them instead of training.
One progress bar runs over all the lessons, its total in estimated seconds (each lesson's measured
time on this machine when known, else :data:`ESTIMATE_S`), so its time estimate is honest from
the start. ``store`` executes the lessons and saves them with their outputs: the kernel name a
fresh JupyterLab writes, each progress bar in its final state, and a stamp in the metadata
(:data:`lmcourse.course.outputs.STAMP`) that says which scale and which execution path made them.

``runs`` regenerates the reference runs committed in ``reference_runs/`` (see
:mod:`lmcourse.store.reference_runs`): it executes, at ``cpu`` scale, each lesson that stores runs,
training every run afresh with ``LMCOURSE_STORE_REFERENCE=1`` so that each finished run is written
there in half precision; a lesson's entries that the new execution did not make are removed.

A LESSON is a number (``7``, ``07``), a number with its letter (``2b``, ``02b``) or a path; none means
all of them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from .. import config
from ..errors import ConfigError
from ..progress import bar
from .outputs import MACHINERY, STAMP, problems

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
# Seconds for a first run at each scale on a 2-core CPU (what the lessons' headers state, rounded up):
# the starting guess of the time estimate until this machine has run the lesson once.
ESTIMATE_S = {"ci": 45, "cpu": 420, "gpu": 7200}
TIMES_FILE = "lesson-times.json"
PATTERN = "[0-9][0-9]*_*.ipynb"  # 02_lstm_from_equations.ipynb, 02b_lstm_language_models.ipynb, ...


def lesson_id(path) -> str:
    """The lesson's id, the part of its file name before the first underscore: ``02``, ``02b``."""
    return Path(path).name.split("_", 1)[0]


def lessons(names: Sequence[str] = (), folder: Path = NOTEBOOKS) -> list[Path]:
    """The lesson notebooks named (by number or path), or all of them in order."""
    every = sorted(Path(folder).glob(PATTERN))
    if not names:
        return every
    chosen = []
    for name in names:
        path = Path(name)
        if path.suffix == ".ipynb":
            if not path.is_file():
                raise FileNotFoundError(f"There is no notebook {name}: give a lesson number (1-10) or a path to "
                                        "an .ipynb file.")
            chosen.append(path)
            continue
        number = re.fullmatch(r"(\d{1,2})([a-z]?)", name.lower())
        match = [p for p in every if number and lesson_id(p) == f"{int(number[1]):02d}{number[2]}"]
        if not match:
            raise ValueError(f"{name!r} is not a lesson: give a number such as 7, 07 or 2b, or a notebook's path.")
        chosen.append(match[0])
    return chosen


def _times_path() -> Path:
    return config.cache_dir() / TIMES_FILE


def measured_times() -> dict:
    """``{"<scale>/<lesson file>": seconds}`` of the lessons this machine has executed before."""
    try:
        return json.loads(_times_path().read_text())
    except (OSError, ValueError):
        return {}


def _record_time(scale: str, lesson: Path, seconds: float) -> None:
    times = measured_times()
    times[f"{scale}/{lesson.name}"] = round(seconds, 1)
    path = _times_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(times, indent=1, sort_keys=True))
    tmp.replace(path)


def estimate(scale: str, lesson: Path) -> float:
    """Seconds the lesson is expected to take: its last measured time here, else the scale's guess."""
    return float(measured_times().get(f"{scale}/{lesson.name}", ESTIMATE_S[scale]))


def _scale(scale: Optional[str]) -> str:
    value = scale or os.environ.get("LMCOURSE_SCALE") or config.DEFAULT_SCALE
    if value not in config.SCALES:
        raise ConfigError(f"{value!r} is not a scale: use one of {', '.join(config.SCALES)}.")
    return value


def execute(path: Path, scale: Optional[str] = None, timeout: Optional[int] = None, env: Optional[dict] = None):
    """Run the notebook at ``path`` in a fresh kernel at ``scale``; ``(notebook, seconds)``.

    The kernel runs in the notebook's folder with ``LMCOURSE_SCALE`` set; ``timeout`` bounds one cell
    (None: no bound). The returned notebook carries the kernel name and the stamp; nothing is written.
    A cell that raises stops the run with ``nbclient``'s CellExecutionError, naming the cell."""
    import nbformat
    from nbclient import NotebookClient

    scale = _scale(scale)
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    kernel_env = dict(os.environ if env is None else env, LMCOURSE_SCALE=scale)
    kernel_env.pop("CI", None)  # progress bars are part of what a stored lesson shows
    client = NotebookClient(nb, timeout=timeout, kernel_name=KERNELSPEC["name"], record_timing=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    start = time.perf_counter()
    with open(os.devnull, "w") as quiet:  # the kernel's own start-up notices; cell output comes by messages
        client.execute(env=kernel_env, stderr=quiet)
    seconds = time.perf_counter() - start
    nb.metadata[STAMP] = {"executed_with": MACHINERY, "scale": scale,
                          "dataset": kernel_env.get("LMCOURSE_DATASET") or config.EMBEDDED}
    return nb, seconds


def warm(paths: Sequence[Path], scale: Optional[str] = None, store_outputs: bool = False,
         env: Optional[dict] = None, after=None) -> dict:
    """Execute each lesson at ``scale`` under one progress bar; ``{lesson name: seconds}``.

    With ``store_outputs`` each lesson is saved with its outputs and its stamp; else the
    outputs are dropped and only the lessons' stored runs (and the measured times) remain.
    ``env`` is the kernel's environment (default: this one's); ``after(path, started)`` is called
    once each lesson has run."""
    scale = _scale(scale)
    plan = {Path(p): estimate(scale, Path(p)) for p in paths}
    seconds: dict = {}
    with bar(total=round(sum(plan.values())), unit="s", desc=f"{len(plan)} lessons at {scale}: ", enabled=True,
             bar_format="{desc}{percentage:3.0f}%|{bar}| {elapsed} so far, about {remaining} left") as progress:
        for path, guess in plan.items():
            progress.set_description(f"{scale}: {path.stem}")
            started = time.time()
            nb, took = execute(path, scale, env=env)
            if store_outputs:
                import nbformat
                nbformat.write(nb, str(path))
                for line in problems(nb):
                    progress.write(f"{path.name}: {line}")
            _record_time(scale, path, took)
            if after is not None:
                after(path, started)
            seconds[path.name] = took
            progress.update(round(guess))
        progress.set_description(f"{scale}: {len(plan)} lessons")
    for name, took in seconds.items():
        print(f"{name:<34} {took:7.1f} s")
    print(f"{'all ' + str(len(seconds)) + ' lessons':<34} {sum(seconds.values()):7.1f} s at {scale}")
    return seconds


def with_runs(paths: Sequence[Path]) -> list[Path]:
    """The lessons among ``paths`` that store runs (their code calls ``train_or_load`` or ``compute_or_load``)."""
    return [p for p in paths if any(call in Path(p).read_text(encoding="utf-8")
                                    for call in ("train_or_load(", "compute_or_load("))]


def regenerate_runs(paths: Sequence[Path]) -> dict:
    """Retrain the reference runs of these lessons at ``cpu`` into ``reference_runs/``; ``{lesson: seconds}``."""
    from ..store import reference_runs as reference

    env = dict(os.environ, LMCOURSE_STORE_REFERENCE="1", LMCOURSE_RETRAIN="1")

    def prune(path: Path, started: float) -> None:
        for gone in reference.prune(lesson_id(path), started):
            print(f"removed {gone}: lesson {lesson_id(path)} no longer trains it")

    seconds = warm(with_runs(paths), "cpu", env=env, after=prune)
    print(f"reference runs: {len(reference.read_manifest())} in {reference.folder()}, "
          f"{reference.total_bytes() / 1e6:.1f} MB of the {reference.BUDGET_BYTES / 1e6:.0f} MB budget")
    return seconds


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.course.lessons", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("warm", "store", "runs"),
                        help="warm: train or load every stored run; store: also save the lessons with their outputs; "
                             "runs: retrain the reference runs committed in reference_runs/ (at cpu)")
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    parser.add_argument("--scale", default=None, help="ci, cpu or gpu (default: $LMCOURSE_SCALE, else cpu)")
    args = parser.parse_args(argv)
    try:
        paths = lessons(args.lessons)
        scale = _scale(args.scale)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from nbclient.exceptions import CellExecutionError
    try:
        if args.command == "runs":
            regenerate_runs(paths)
        else:
            warm(paths, scale, store_outputs=args.command == "store")
    except CellExecutionError as err:
        last = [ln for ln in str(err).splitlines() if ln.strip()][-1:] or ["(no message)"]
        print(f"error: a lesson stopped with an error, so the lessons after it did not run: {last[0]}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
