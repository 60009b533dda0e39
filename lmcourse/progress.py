"""Progress: when to show it, and the one progress bar every part of the course uses.

Progress bars and live plots stay off under continuous integration (the ``CI`` variable) and at the
``ci`` scale; a live plot also needs an IPython kernel to draw in. ``LMCOURSE_LIVE_PLOT=1`` (or ``0``)
forces the live plot on (or off) inside a kernel at any scale, which is how the browser test sees it
draw at ``ci``. Every module that reports progress asks here, so this sits below all of them.

:func:`bar` makes every bar of the package and of the lessons. In a terminal it is plain ``tqdm``
text. In a notebook it is one output redrawn in place through a display handle (an HTML bar, with
tqdm's text line as the plain-text copy), so a saved notebook keeps each bar as it was when it
finished, "100%" and the time it took, and a page read without a kernel never shows a bar stuck
at "0%" or a widget's raw text. A bar made with ``leave=False`` empties its output when it closes.
"""
from __future__ import annotations

import html
import os
from itertools import count
from typing import Iterable, Optional

from tqdm.std import tqdm as _text_tqdm

from . import config
from .errors import ConfigError

__all__ = ["quiet_run", "in_notebook", "progress_enabled", "live_plot_enabled", "bar", "tqdm", "NotebookBar"]

_ids = count()


def quiet_run() -> bool:
    """True under continuous integration (``CI`` set) or at the ``ci`` scale."""
    return bool(os.environ.get("CI")) or config.by_scale(ci=True, cpu=False, gpu=False)


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


def _forced_live_plot() -> Optional[bool]:
    value = os.environ.get("LMCOURSE_LIVE_PLOT", "").strip().lower()
    if value in ("", "auto"):
        return None
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"LMCOURSE_LIVE_PLOT={value!r} is not a switch: set it to 1 (always draw in a "
                             "notebook), 0 (never), or unset it.")


def live_plot_enabled(flag: Optional[bool]) -> bool:
    """Only in a notebook; there ``flag`` when given, else ``LMCOURSE_LIVE_PLOT``, else on unless quiet."""
    if not in_notebook():
        return False
    if flag is not None:
        return bool(flag)
    forced = _forced_live_plot()
    return forced if forced is not None else not quiet_run()


# ------------------------------------------------------------------------------------ the bar
def _show(bundle: dict, display_id: str) -> None:
    from IPython.display import display
    display(bundle, raw=True, display_id=display_id)


def _update(bundle: dict, display_id: str) -> None:
    from IPython.display import update_display
    update_display(bundle, raw=True, display_id=display_id)


_COLOURS = {"running": "#2f6fba", "done": "#2e8540", "stopped": "#b42318"}


def bar_html(text: str, fraction: Optional[float], state: str) -> str:
    """One bar as HTML: the label, a filled track (when the total is known) and the counts."""
    left, _, right = text.partition("<bar/>")
    left, right = left.rstrip("|").strip(), right.lstrip("|").strip()
    track = ""
    if fraction is not None:
        width = 100 * min(max(fraction, 0.0), 1.0)
        track = (f'<span style="display: inline-block; width: 220px; height: 0.8em; background: #e4e4e4; '
                 f'border-radius: 3px; overflow: hidden; vertical-align: middle; margin: 0 6px">'
                 f'<span style="display: block; width: {width:.1f}%; height: 100%; '
                 f'background: {_COLOURS[state]}"></span></span>')
    return (f'<div class="lmcourse-progress" style="font-family: monospace; font-size: 12px; white-space: pre">'
            f"{html.escape(left)}{track}{html.escape(right)}</div>")


class NotebookBar(_text_tqdm):
    """A ``tqdm`` drawn as one notebook output that is updated in place and saved in its last state."""

    def __init__(self, *args, **kwargs):
        kwargs = dict(kwargs, gui=True)  # tqdm then leaves the drawing to display()
        kwargs.setdefault("mininterval", 0.2)
        self._display_id = None
        self._state = "running"
        super().__init__(*args, **kwargs)
        if not self.disable:
            self._display_id = f"lmcourse-bar-{os.getpid()}-{next(_ids)}"
            _show(self._bundle(), self._display_id)

    def _bundle(self) -> dict:
        if self._state == "cleared":
            return {"text/plain": ""}
        d = self.format_dict
        text = self.format_meter(**d)
        d["bar_format"] = (d["bar_format"] or "{l_bar}<bar/>{r_bar}").replace("{bar}", "<bar/>")
        marked = self.format_meter(**d)
        fraction = self.n / self.total if self.total else None
        return {"text/plain": text, "text/html": bar_html(marked, fraction, self._state)}

    def display(self, msg=None, pos=None):  # called by tqdm on every refresh
        if self._display_id is not None:
            _update(self._bundle(), self._display_id)
        return True

    def __iter__(self):
        try:
            yield from super().__iter__()
        except BaseException:
            self._state = "stopped"
            raise

    def update(self, n=1):
        try:
            return super().update(n)
        except BaseException:
            self._state = "stopped"
            raise

    def close(self):
        if self.disable or self._display_id is None:
            return super().close()
        super().close()
        if self._state == "running":
            finished = not self.total or self.n >= self.total
            self._state = "done" if finished else "stopped"
        if not self.leave and self._state == "done":
            self._state = "cleared"
        self.display()
        self._display_id = None

    def clear(self, *_, **__):  # nothing to erase: the output is replaced in place
        pass

    def reset(self, total=None):
        self._state = "running"
        super().reset(total=total)


def tqdm(*args, **kwargs):
    """``tqdm.auto.tqdm``'s drop-in: a :class:`NotebookBar` in a notebook, plain ``tqdm`` text elsewhere."""
    return (NotebookBar if in_notebook() else _text_tqdm)(*args, **kwargs)


def bar(iterable: Optional[Iterable] = None, *, total=None, desc: Optional[str] = None, unit: str = "it",
        leave: bool = True, enabled: Optional[bool] = None, **kwargs):
    """A progress bar over ``iterable`` (or ``total`` steps fed with ``.update``), used like ``tqdm``.

    ``enabled``: True, False, or None (on unless the run is quiet, see :func:`progress_enabled`); any other
    ``tqdm`` option (``unit_scale``, ``postfix``, ``dynamic_ncols``, ...) is passed on."""
    disable = bool(kwargs.pop("disable", False)) or not progress_enabled(enabled)
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, disable=disable, **kwargs)
