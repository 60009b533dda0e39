"""A widget and a static copy of its first state in one output.

A notebook output is a bundle of the same thing in several formats; the viewer shows the richest one
it can. :class:`WithFallback` puts the widget's view next to a picture (PNG) or an HTML page of its
default state, and a plain-text sentence. JupyterLab with a running kernel draws the widget; a
static viewer, an untrusted notebook or the HTML course site shows the picture instead, in the same
place, so the figure never appears twice and never as ``VBox(children=...``.

Display it like a widget (the last line of a cell, or ``display(...)``); ``.widget`` is the widget.
"""
from __future__ import annotations

import base64
import io
from typing import Optional

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
NOTE = "(an interactive explorer: it moves with a running kernel; its first state is drawn here as a picture)"


def png_of(figure, dpi: Optional[int] = None) -> bytes:
    """A matplotlib Figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi or figure.dpi, bbox_inches="tight")
    return buffer.getvalue()


class WithFallback:
    """``widget`` shown with a static copy: ``figure`` (a matplotlib Figure) or ``png`` bytes, and/or ``html``."""

    def __init__(self, widget, *, figure=None, png: Optional[bytes] = None, html: Optional[str] = None,
                 text: str = NOTE):
        if figure is not None and png is not None:
            raise ValueError("Give WithFallback a figure or PNG bytes, not both.")
        self.widget = widget
        self.png = png_of(figure) if figure is not None else png
        self.html, self.text = html, text
        if self.png is None and self.html is None:
            raise ValueError("WithFallback needs a static copy: figure=, png= or html=.")

    def bundle(self) -> dict:
        """The output's formats: the widget's view, the picture and/or HTML, and the sentence."""
        data = {k: v for k, v in self.widget._repr_mimebundle_().items() if k == WIDGET_VIEW}
        if self.png is not None:
            data["image/png"] = base64.b64encode(self.png).decode("ascii")
        if self.html is not None:
            data["text/html"] = self.html
        data["text/plain"] = self.text
        return data

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.bundle()
