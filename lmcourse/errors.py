"""The package's own errors, and the argument checks every module shares.

Every error a user can cause is raised with ONE sentence: what was wrong and how to fix it. The
classes below let a caller (the command line above all) tell such an error from a bug:

- :class:`LMCourseError`: the base of every error this package raises on purpose;
- :class:`ConfigError`: an environment variable or folder setting that cannot be used;
- :class:`CorpusError`: a corpus file that is missing, empty, not UTF-8 or inconsistent;
- :class:`CheckpointError`: a checkpoint that is damaged, not a course checkpoint, or does not fit;
- :class:`MissingFileError`: a file the user named is not there (also a ``FileNotFoundError``);
- :class:`RunDirError`: a run directory that another run is using, that already holds a run, or
  whose files do not fit the run asked for;
- :class:`WriteError`: a file that cannot be written (also an ``OSError``), and :class:`NoSpaceError`,
  the case of a full disk;
- :class:`StoppedRankError`: a process of a ``torchrun`` job that stopped answering (also a ``RuntimeError``).

:class:`ConfigError`, :class:`CorpusError`, :class:`CheckpointError` and :class:`RunDirError` are also
``ValueError`` s, so ``except ValueError`` keeps working for callers that knew only that.
:class:`lmcourse.corpora.download.DownloadError` is an :class:`LMCourseError` too.

Argument checks raise ``TypeError`` for the wrong kind of value and ``ValueError`` for a value out
of range; a float parameter is always checked to be finite (``nan < 0`` is False, so a bare range
test lets NaN through).
"""
from __future__ import annotations

import math
import numbers
from typing import Optional


class LMCourseError(Exception):
    """An error this package raises on purpose; its message is one sentence saying what to do."""


class ConfigError(LMCourseError, ValueError):
    """An environment variable or folder setting that cannot be used."""


class CorpusError(LMCourseError, ValueError):
    """A corpus that cannot be read: missing or empty files, bad encoding, unknown words."""


class CheckpointError(LMCourseError, ValueError):
    """A checkpoint file that is damaged, is not a course checkpoint, or does not fit the model."""


class MissingFileError(LMCourseError, FileNotFoundError):
    """A file the user named (a checkpoint, say) is not there."""


class RunDirError(LMCourseError, ValueError):
    """A run directory in use by another run, already holding a run, or not holding the run asked for."""


class WriteError(LMCourseError, OSError):
    """A file that cannot be written; the message names the file, never a temporary one."""


class NoSpaceError(WriteError):
    """The disk is full: the message says how much the write needed."""


class StoppedRankError(LMCourseError, RuntimeError):
    """A process of a data-parallel job stopped answering; the message names it when it can be told."""


def check_number(value, name: str, low: Optional[float] = None, high: Optional[float] = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float, checked to be a real, finite number in ``[low, high]``.

    ``low_open`` / ``high_open`` exclude the bound itself: the interval is then ``(low, ...`` or
    ``..., high)``. Raises ``TypeError`` for a non-number and ``ValueError`` for NaN, an infinity
    or a value outside the interval.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}.")
    value = float(value)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if not math.isfinite(value) or below or above:
        lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
        hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
        need = "".join(f" {s}" for s in (lo, hi) if s).replace(f"{lo} {hi}", f"{lo} and {hi}")
        raise ValueError(f"{name} must be a finite number{need}, got {value}.")
    return value


def check_int(value, name: str, low: Optional[int] = None) -> int:
    """``value`` as an int, checked to be a whole number (not a bool, not a float) of at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number, got {type(value).__name__} {value!r}.")
    if low is not None and value < low:
        raise ValueError(f"{name} must be at least {low}, got {value}.")
    return int(value)


def sentence(err: BaseException) -> str:
    """The message of ``err`` on one line: a ``KeyError`` without its quotes, an ``OSError`` from the
    system as "what happened (which file): what to check", the type's name when there is no message."""
    if isinstance(err, OSError) and err.strerror and not isinstance(err, LMCourseError):
        where = f" ({err.filename})" if err.filename else ""
        message = f"{err.strerror}{where}: check the path and that you may read and write there."
    elif isinstance(err, KeyError) and len(err.args) == 1:
        message = err.args[0]
    else:
        message = str(err)
    message = " ".join(str(message).split())
    return message or type(err).__name__


def one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Show a warning as ``warning: <the sentence>``, without the source file and line Python puts before it
    (the signature of ``warnings.showwarning``). The command line shows its warnings so, and so does a lesson
    (``lmcourse`` installs it when imported in a Jupyter kernel): a saved lesson's outputs carry no folder of the
    machine that ran it."""
    import sys

    print(f"warning: {' '.join(str(message).split())}", file=sys.stderr if file is None else file)


def _one_sentence(shell, etype, value, tb, tb_offset=None) -> list:
    """IPython's handler of a :class:`ConfigError`: the error's name and its sentence, no traceback."""
    stb = [f"{etype.__name__}: {' '.join(str(value).split())}"]
    shell._showtraceback(etype, value, stb)  # sent as the cell's error output: the cell still fails
    return stb


def show_in_one_line() -> None:
    """In a Jupyter kernel, show a :class:`ConfigError` as its one sentence (``ConfigError: LMCOURSE_SCALE='x' is not a
    scale: ...``) instead of a traceback whose last line is the sentence; the cell still stops with an error, so
    Run All stops there. ``lmcourse`` calls it when imported in a kernel; elsewhere it does nothing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and hasattr(shell, "set_custom_exc") and hasattr(shell, "_showtraceback"):
        shell.set_custom_exc((ConfigError,), _one_sentence)
