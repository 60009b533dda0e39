"""lmcourse: the implementations behind the course's lessons.

Importing the package first sets a passive OpenMP wait policy. On a small machine, torch's
default spinning worker threads slow down many-fold whenever another process (a Jupyter
server, a second test) holds a core; waiting passively avoids that. It only takes effect when
lmcourse is imported before torch, which is what every notebook does.

Imported on the way to a command (``python -m lmcourse ...``, ``python -m lmcourse.authoring.lessons ...``), it
makes a Ctrl-C that comes before the command's ``main()`` runs (while torch is imported, for seconds) end the
process with one line and status 130 instead of a traceback; ``main()`` then restores the usual
``KeyboardInterrupt`` (:func:`_ctrl_c_raises`).

It also fixes glibc's mmap threshold (:mod:`lmcourse.memory`), so that training on the CPU does not
grow the heap by one logits buffer per batch. In a Jupyter kernel (a lesson) it shows warnings as one
sentence, without the source file Python names before them (:func:`lmcourse.errors.one_line_warning`), so
that a saved lesson's outputs carry no folder of the machine that ran it, and a setting that cannot be used
(a :class:`~lmcourse.errors.ConfigError`, raised by the first cell) stops the lesson with its one sentence, not
a traceback (:func:`lmcourse.errors.show_in_one_line`).
"""
import os as _os
import sys as _sys


EXIT_INTERRUPTED = 130  # the status after Ctrl-C, as shells give it (128 + SIGINT): the one home of the number


def _interrupted_while_starting(signum, frame):  # Ctrl-C before a command's main() runs: one line, status 130
    _os.write(2, b"\nerror: interrupted while the command was starting; nothing was written.\n")
    _os._exit(EXIT_INTERRUPTED)


def _ctrl_c_raises() -> None:
    """Called first by every command's main(): from here on Ctrl-C raises ``KeyboardInterrupt`` again, which the
    command turns into its own one line and status 130."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is _interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def exit_now(status: int) -> None:
    """End the process at once with ``status`` when it is the Ctrl-C status (:data:`EXIT_INTERRUPTED`), else return.

    Everything worth keeping is already on disk by then (files are replaced whole, the lock is the
    OS's); what is skipped is only the interpreter's tear-down, which frees a large model's tensors
    one by one and took seconds of the time from Ctrl-C to exit on a loaded machine."""
    if status != EXIT_INTERRUPTED:
        return
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    import os  # only on the way out: the package imports nothing it need not

    os._exit(status)


if _sys.argv[:1] == ["-m"]:  # imported by ``python -m lmcourse...`` on its way to a command: torch takes seconds
    import signal as _signal

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _interrupted_while_starting)

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .memory import limit_heap_growth as _limit_heap_growth  # noqa: E402

_limit_heap_growth()

if "ipykernel" in _sys.modules:  # a lesson: its warnings are saved with its outputs
    import warnings as _warnings

    from .errors import one_line_warning as _one_line_warning  # noqa: E402
    from .errors import show_in_one_line as _show_in_one_line  # noqa: E402

    _warnings.showwarning = _one_line_warning
    _show_in_one_line()

from . import config as _config  # noqa: E402
from .config import device, seed_everything  # noqa: E402
from .lm import LanguageModel, bits_per_char, perplexity  # noqa: E402
from .vocab import Vocab  # noqa: E402

__all__ = [
    "DATASET", "SCALE", "device", "seed_everything",
    "Vocab", "LanguageModel", "perplexity", "bits_per_char",
]
__version__ = "1.0.0"  # the one place the version is written: pyproject.toml reads it


def __getattr__(name: str):
    """``lmcourse.SCALE`` and ``lmcourse.DATASET`` are read from the config on use, so a bad
    LMCOURSE_SCALE or LMCOURSE_DATASET never stops the import."""
    if name in ("SCALE", "DATASET"):
        return getattr(_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
