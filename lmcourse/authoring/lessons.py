"""The lessons run headless: executed by a Jupyter kernel exactly as Run All would, outside a browser.

Two uses, both from the command line (and from the Makefile)::

    python -m lmcourse.authoring.lessons warm [--scale cpu] [LESSON ...]     # make warm
    python -m lmcourse.authoring.lessons store [--scale cpu] [LESSON ...]    # make lessons
    python -m lmcourse.authoring.lessons runs [LESSON ...]                   # make runs

(the options may come anywhere: ``warm --scale ci 1`` and ``warm 1 --scale ci`` are the same).

``warm`` executes every lesson at the scale (default ``$LMCOURSE_SCALE``, else ``cpu``) and throws the
outputs away: a lesson trains each of its long runs the first time and stores it (see
:mod:`lmcourse.store.stored_runs`), so after ``warm`` a Run All loads them instead of training.
One progress bar runs over all the lessons, its total in estimated seconds (each lesson's measured
time on this machine when known, else :func:`estimate_s`), so its time estimate is honest from
the start. The measured times are kept in ``lesson-times.json``, sealed with its checksum (see
:mod:`lmcourse.checksum`) and replaced whole under a lock, so two ``make warm`` sharing a cache
folder never lose each other's times; a damaged file is ignored with one note. Ctrl-C stops at once
with one line. ``store`` executes the lessons and saves them with their outputs: the kernel name a
fresh JupyterLab writes, each progress bar in its final state, and a stamp in the metadata
(:data:`lmcourse.authoring.outputs.STAMP`) that says which scale and which execution path made them, and
each cell's slide type as :mod:`lmcourse.authoring.slides` declares it.

``runs`` regenerates the reference runs committed in ``reference_runs/`` (see
:mod:`lmcourse.store.reference_runs`): it executes, at ``cpu`` scale, each lesson that stores runs,
training every run afresh with ``LMCOURSE_STORE_REFERENCE=1`` so that each finished run is written
there in half precision; a lesson's entries that the new execution did not make are removed.

A LESSON is a number (``7``, ``07``), a number with its letter (``2b``, ``02b``) or a path; none means
all of them.
"""
from __future__ import annotations

import argparse
import atexit
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from .. import EXIT_INTERRUPTED, _ctrl_c_raises, config, exit_now
from ..checksum import atomic_write, read_sealed_json, sealed_json
from ..config import by_scale
from ..course.catalog import NOTEBOOKS, PATTERN, REPO, check_writable, lesson_id, lessons  # noqa: F401 (the lessons, listed)
from ..errors import ConfigError, LMCourseError, sentence
from ..progress import bar
from ..store import reference_runs as reference
from ..training.lock import RunLock
from .outputs import MACHINERY, STAMP, problems

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
TIMES_FILE = "lesson-times.json"


def estimate_s(scale: str) -> float:
    """Seconds for a first run of a lesson at ``scale`` on a 2-core CPU (what the lessons' headers state, rounded
    up): the starting guess of the time estimate until this machine has run the lesson once."""
    return by_scale(ci=45, cpu=420, gpu=7200, scale=scale)


def _times_path() -> Path:
    return config.cache_dir() / TIMES_FILE


def measured_times(path: Optional[Path] = None) -> dict:
    """``{"<scale>/<lesson file>": seconds}`` of the lessons this machine has executed before.

    A file that is damaged (its checksum does not match) is ignored with one note: the times are
    only estimates, and the next lesson that runs writes the file afresh."""
    path = _times_path() if path is None else Path(path)
    try:
        times = read_sealed_json(path).get("times")
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        print(f"note: {err}", file=sys.stderr)
        return {}
    if not isinstance(times, dict) or not all(isinstance(v, (int, float)) for v in times.values()):
        return {}
    return times


def _record_time(scale: str, lesson: Path, seconds: float, path: Optional[Path] = None) -> None:
    """Add one measured time to the file, read and replaced whole while holding the package's one lock
    (:class:`lmcourse.training.lock.RunLock`, waited for), which other writers share."""
    path = _times_path() if path is None else Path(path)
    with RunLock(path.parent, "LMCOURSE_CACHE", name=path.name + ".lock", wait=True):
        times = measured_times(path)
        times[f"{scale}/{lesson.name}"] = round(seconds, 1)
        atomic_write(path, sealed_json({"format": 1, "times": times}))


def estimate(scale: str, lesson: Path) -> float:
    """Seconds the lesson is expected to take: its last measured time here, else the scale's guess."""
    return float(measured_times().get(f"{scale}/{lesson.name}", estimate_s(scale)))


def _scale(scale: Optional[str]) -> str:
    value = scale or os.environ.get("LMCOURSE_SCALE") or config.DEFAULT_SCALE
    if value not in config.SCALES:
        raise ConfigError(f"{value!r} is not a scale: use one of {', '.join(config.SCALES)}.")
    return value


class NotebookError(LMCourseError, ValueError):
    """A lesson file that is not a notebook that can be read, or that holds a stored error."""


def read_notebook(path: Path):
    """The notebook at ``path`` (nbformat 4), or a :class:`NotebookError` naming the file in one sentence."""
    import nbformat

    try:
        nb = nbformat.read(str(path), as_version=4)
        nbformat.validate(nb)
    except OSError as err:
        raise NotebookError(f"{path} cannot be read ({err.strerror or type(err).__name__}): check that it exists "
                            "and that you may read it.") from None
    except Exception as err:  # nbformat raises JSON, validation, key and attribute errors for a broken file
        why = " ".join(str(err).split())[:120] or type(err).__name__
        raise NotebookError(f"{path} is not a notebook that can be read ({why}): restore it, e.g. with "
                            f"git checkout -- {path}.") from None
    return nb


def save_notebook(nb, path: Path) -> Path:
    """Write the notebook ``nb`` to ``path`` as nbformat writes it, replaced whole
    (:func:`lmcourse.checksum.atomic_write`): a full disk or a file-size limit leaves the lesson as it was, with one
    sentence."""
    import nbformat

    text = nbformat.writes(nb)
    return atomic_write(path, text if text.endswith("\n") else text + "\n")


def gpu_on_cpu_note(scale: str, paths: Sequence[Path]) -> Optional[str]:
    """A sentence saying what ``gpu`` scale costs when there is no GPU, else None."""
    import torch

    if scale != "gpu" or torch.cuda.is_available():
        return None
    # no time is promised: what gpu costs differs from lesson to lesson (01 counts n-grams as at cpu, 09 trains for
    # hours), and each lesson's header says what it costs
    which = "this lesson" if len(paths) == 1 else f"these {len(paths)} lessons"
    return (f"note: the gpu scale is sized for a GPU and this machine has none: where {which} train at gpu sizes "
            "(each lesson's header says what that costs) they take many times longer on the CPU, hours to days; "
            "use --scale cpu for minutes a lesson, or Ctrl-C to stop.")


def _quiet_log():
    """A logger for nbclient that says nothing: what went wrong is reported in one sentence instead."""
    import logging

    log = logging.getLogger("lmcourse.lessons.nbclient")
    log.propagate, log.disabled = False, True
    return log


def execute(path: Path, scale: Optional[str] = None, timeout: Optional[int] = None, env: Optional[dict] = None):
    """Run the notebook at ``path`` in a fresh kernel at ``scale``; ``(notebook, seconds)``.

    The kernel runs in the notebook's folder with ``LMCOURSE_SCALE`` set; ``timeout`` bounds one cell
    (None: no bound). The returned notebook carries the kernel name and the stamp; nothing is written.
    A cell that raises stops the run with ``nbclient``'s CellExecutionError, naming the cell; a kernel that
    cannot start is a :class:`NotebookError` in one sentence, and Ctrl-C (while the kernel starts or runs)
    a ``KeyboardInterrupt``."""
    from nbclient import NotebookClient

    scale = _scale(scale)
    path = Path(path)
    nb = read_notebook(path)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in nb.cells:  # timings an earlier run or editor left (dates): a stored lesson carries none
        cell.get("metadata", {}).pop("execution", None)
    kernel_env = dict(os.environ if env is None else env, LMCOURSE_SCALE=scale)
    kernel_env.pop("CI", None)  # progress bars are part of what a stored lesson shows
    started = []  # filled once the kernel answered
    client = NotebookClient(nb, timeout=timeout, kernel_name=KERNELSPEC["name"], record_timing=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}}, log=_quiet_log(),
                            shutdown_kernel="immediate",  # at the end, or on Ctrl-C: nothing in it is kept
                            on_notebook_start=lambda notebook: started.append(True))
    start = time.perf_counter()
    try:
        with open(os.devnull, "w") as quiet:  # the kernel's own start-up notices; cell output comes by messages
            client.execute(env=kernel_env, stderr=quiet)
    except BaseException as err:
        # Ctrl-C: nbclient's own handler of the signal stops the kernel (which then looks dead to it), whether the
        # kernel was starting or running a cell, and whether the signal reached this process alone or its group
        if isinstance(err, KeyboardInterrupt) or getattr(client, "_async_cleanup_kernel_future", None) is not None:
            raise KeyboardInterrupt from None
        if not started and isinstance(err, Exception):
            why = " ".join(str(err).split())[:160] or type(err).__name__
            raise NotebookError(f"The Jupyter kernel for {path.name} could not start ({why}): check that ipykernel "
                                "is installed in this environment (make .venv/.installed) and that the python3 "
                                "kernel starts, e.g. with jupyter console.") from None
        raise
    finally:  # nbclient leaves its clean-up registered for the exit when the kernel failed to start
        atexit.unregister(client._cleanup_kernel)
    seconds = time.perf_counter() - start
    nb.metadata[STAMP] = {"executed_with": MACHINERY, "scale": scale,
                          "dataset": kernel_env.get("LMCOURSE_DATASET") or config.EMBEDDED}
    return nb, seconds


def warm(paths: Sequence[Path], scale: Optional[str] = None, store_outputs: bool = False,
         env: Optional[dict] = None, after=None) -> dict:
    """Execute each lesson at ``scale`` under one progress bar; ``{lesson name: seconds}``.

    With ``store_outputs`` each lesson is saved with its outputs and its stamp; else the
    outputs are dropped and only the lessons' stored runs (and the measured times) remain. A saved lesson whose
    outputs the checker (:func:`.outputs.problems`) refuses is named in a :class:`NotebookError` once every lesson
    has run and been saved, so ``make lessons`` fails instead of leaving it for the tests to find.
    ``env`` is the kernel's environment (default: this one's); ``after(path, started)`` is called
    once each lesson has run."""
    scale = _scale(scale)
    for path in paths:  # a broken lesson is named before hours of the others run
        read_notebook(Path(path))
    note = gpu_on_cpu_note(scale, paths)
    if note:
        print(note, file=sys.stderr)
    plan = {Path(p): estimate(scale, Path(p)) for p in paths}
    seconds: dict = {}
    flagged: list = []  # the stored lessons whose outputs the output checker refuses
    left = "" if note else ", about {remaining} left"  # the estimates are a GPU's: no honest time left on a CPU
    with bar(total=round(sum(plan.values())), unit="s", desc=f"{len(plan)} lessons at {scale}: ", enabled=True,
             bar_format="{desc}{percentage:3.0f}%|{bar}| {elapsed} so far" + left) as progress:
        for path, guess in plan.items():
            progress.set_description(f"{scale}: {path.stem}")
            started = time.time()
            nb, took = execute(path, scale, env=env)
            if store_outputs:
                from .slides import stamp_lesson  # the demo path's slide types (lessons sits below slides)
                unstamped = stamp_lesson(nb, path)
                save_notebook(nb, path)
                if unstamped:
                    progress.write(f"{path.name}: {unstamped}")
                found = problems(nb)
                for line in found:
                    progress.write(f"{path.name}: {line}")
                if found:
                    flagged.append(path.name)
            _record_time(scale, path, took)
            if after is not None:
                after(path, started)
            seconds[path.name] = took
            progress.update(round(guess))
        progress.set_description(f"{scale}: {len(plan)} lessons")
    for name, took in seconds.items():
        print(f"{name:<34} {took:7.1f} s")
    print(f"{'all ' + str(len(seconds)) + ' lessons':<34} {sum(seconds.values()):7.1f} s at {scale}")
    if flagged:
        raise NotebookError(f"{', '.join(flagged)} was saved with outputs that tests/test_stored_outputs.py refuses "
                            "(the lines above say which): a folder of this machine (set LMCOURSE_DATA to a folder "
                            "that holds the corpora), a date, or a progress bar left unfinished; change the cell "
                            "that prints it, then store the lesson again.")
    return seconds


def with_runs(paths: Sequence[Path]) -> list[Path]:
    """The lessons among ``paths`` that store runs: those the registry (:mod:`lmcourse.course.registry`) names as the
    owner of a declared run."""
    from ..course.registry import REGISTRY, lesson_of  # here: importing the registry imports every lesson's runs

    owners = {lesson_of(name) for name in REGISTRY}
    return [p for p in paths if lesson_id(p) in owners]


def regenerate_runs(paths: Sequence[Path]) -> dict:
    """Retrain the reference runs of these lessons at ``cpu`` into ``reference_runs/``; ``{lesson: seconds}``."""

    # only the runs these lessons own are retrained; a run of another lesson they read (the course model) is loaded
    env = dict(os.environ, LMCOURSE_STORE_REFERENCE="1", LMCOURSE_RETRAIN="1",
               LMCOURSE_RETRAIN_LESSONS=",".join(lesson_id(p) for p in paths))

    def prune(path: Path, started: float) -> None:
        for gone in reference.prune(lesson_id(path), started):
            print(f"removed {gone}: lesson {lesson_id(path)} no longer trains it")

    seconds = warm(with_runs(paths), "cpu", env=env, after=prune)
    print(f"reference runs: {len(reference.read_manifest())} in {reference.folder()}, "
          f"{reference.total_bytes() / 1e6:.1f} MB of the {reference.BUDGET_BYTES / 1e6:.0f} MB budget")
    return seconds


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line (``make warm``, ``make lessons``, ``make runs``, each with ``LESSONS="2 7"``), options before
    or after the lessons."""
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.lessons", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("warm", "store", "runs"),
                        help="warm: train or load every stored run; store: also save the lessons with their outputs; "
                             "runs: retrain the reference runs committed in reference_runs/ (at cpu)")
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    parser.add_argument("--scale", default=None, help="ci, cpu or gpu (default: $LMCOURSE_SCALE, else cpu)")
    return parser.parse_intermixed_args(argv)  # options before or after the lessons


def main(argv: Optional[Sequence[str]] = None) -> int:
    _ctrl_c_raises()
    args = parse_args(argv)
    try:
        config.check_environment()
        paths = lessons(args.lessons)
        scale = _scale(args.scale)
        if args.command == "store":  # before hours of lessons run: where they would be saved
            check_writable(paths, "saves the lessons with their outputs")
        if args.command == "runs":
            check_writable([reference.folder()], "retrains the committed runs")
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        return _run(args.command, paths, scale)
    except KeyboardInterrupt:
        print("\nerror: interrupted; the lessons that finished kept their stored runs and times, a run that "
              "was training keeps its last saved state.", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(command: str, paths: list, scale: str) -> int:
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    try:
        if command == "runs":
            regenerate_runs(paths)
        else:
            warm(paths, scale, store_outputs=command == "store")
    except CellExecutionError as err:
        if getattr(err, "ename", "") == "KeyboardInterrupt":  # Ctrl-C reached the kernel too
            raise KeyboardInterrupt from None
        last = [ln for ln in str(err).splitlines() if ln.strip()][-1:] or ["(no message)"]
        print(f"error: a lesson stopped with an error, so the lessons after it did not run: {last[0]}",
              file=sys.stderr)
        return 1
    except (CellTimeoutError, DeadKernelError) as err:
        print(f"error: a lesson's kernel stopped ({type(err).__name__}), so the lessons after it did not run: "
              f"{' '.join(str(err).split())[:200]}", file=sys.stderr)
        return 1
    except (LMCourseError, OSError) as err:
        print(f"error: {sentence(err)}", file=sys.stderr)
        return 1
    return 0


def exit_with(status: int) -> None:
    """End the process with ``status``; after Ctrl-C (:data:`lmcourse.EXIT_INTERRUPTED`) at once (:func:`lmcourse.exit_now`)."""
    exit_now(status)
    sys.exit(status)


if __name__ == "__main__":
    exit_with(main())
