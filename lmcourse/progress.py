"""When to show progress: the one switch read by the trainer, the cache's tuning and dynamic evaluation.

Progress bars and live plots stay off under continuous integration (the ``CI`` variable) and at the
``ci`` scale; a live plot also needs an IPython kernel to draw in. Every module that reports progress
asks here, so this sits below all of them.
"""
from __future__ import annotations

import os
from typing import Optional

from . import config


def quiet_run() -> bool:
    """True under continuous integration (``CI`` set) or at the ``ci`` scale."""
    return bool(os.environ.get("CI")) or config.SCALE == "ci"


def in_notebook() -> bool:
    """True inside an IPython kernel (Jupyter), where figures can be redrawn in place."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_enabled(flag: Optional[bool]) -> bool:
    """``flag`` when given, else on unless the run is quiet."""
    return bool(flag) if flag is not None else not quiet_run()


def live_plot_enabled(flag: Optional[bool]) -> bool:
    """Only in a notebook; there ``flag`` when given, else on unless the run is quiet."""
    return in_notebook() and (bool(flag) if flag is not None else not quiet_run())
