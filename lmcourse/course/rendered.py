"""Cells shown as their output only: take-aways (and any prose with numbers in it) rendered as Markdown.

A lesson's take-away quotes numbers the lesson measured, so it is a code cell that builds Markdown from
variables. What a reader must see is the Markdown, never the Python that formats it, so the cell's
**input is hidden** everywhere a lesson is read:

- the convention is JupyterLab's own flag, the cell metadata ``"jupyter": {"source_hidden": true}``
  (:data:`HIDDEN_KEY`); JupyterLab collapses such an input to a thin bar in the notebook view;
- the RISE show renders the notebook's cells, so the input is collapsed there too, and
  ``notebooks/rise.css`` (which RISE loads beside the lesson) hides the bar on the slides;
- ``make slides`` (:mod:`lmcourse.authoring.deck`) and ``make book`` (:mod:`lmcourse.authoring.book`) leave
  the input out (:func:`drop_hidden_inputs`);
- which cells have hidden inputs is declared with the demo path in :mod:`lmcourse.authoring.slides`
  (``HIDDEN``) and stamped by ``python -m lmcourse.authoring.slides stamp``, so a cell collapsed by accident in JupyterLab
  is caught by ``tests/test_slides.py`` and restored by the next stamp.

In the lesson, the take-away cell is one call::

    from lmcourse.course.rendered import takeaway
    takeaway(f"Tying removes {share:.0%} of the parameters and changes test perplexity by {change(t, u)}.",
             "Every model from here on is tied, as in the AWD-LSTM.")

Each argument is one bullet (dedented; continuation lines may be indented); ``closing=`` adds a last
paragraph. :func:`markdown` renders any other text the same way (a table, a sentence built around a
number). Both return an object Jupyter shows as Markdown, so it is the cell's last expression.
"""
from __future__ import annotations

import re
import textwrap

__all__ = ["HIDDEN_KEY", "input_hidden", "hide_input", "drop_hidden_inputs", "markdown", "takeaway", "Rendered"]

HIDDEN_KEY = ("jupyter", "source_hidden")  # cell.metadata.jupyter.source_hidden: JupyterLab's collapsed input


def input_hidden(cell) -> bool:
    """True when the cell's input is hidden (its metadata carries ``jupyter.source_hidden: true``)."""
    outer, inner = HIDDEN_KEY
    return bool((cell.get("metadata", {}).get(outer) or {}).get(inner, False))


def hide_input(cell, hidden: bool = True) -> bool:
    """Set (or, with ``hidden=False``, remove) the flag on ``cell`` (a notebook cell as a dict); True when
    it changed. Removing it leaves no empty ``jupyter`` entry behind."""
    outer, inner = HIDDEN_KEY
    if input_hidden(cell) == hidden:
        return False
    meta = cell.setdefault("metadata", {})
    if hidden:
        meta.setdefault(outer, {})[inner] = True
    else:
        meta[outer].pop(inner, None)
        if not meta[outer]:
            del meta[outer]
    return True


def drop_hidden_inputs(nb) -> int:
    """Mark every hidden input for nbconvert to leave out (``metadata.transient.remove_source``, which its
    templates honour): a static page or deck then shows only the cell's output. Returns how many."""
    dropped = 0
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code" and input_hidden(cell):
            cell["metadata"].setdefault("transient", {})["remove_source"] = True
            dropped += 1
    return dropped


class Rendered:
    """Markdown text that Jupyter displays rendered (``_repr_markdown_``) and ``print`` shows as it is."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other) -> bool:
        return isinstance(other, Rendered) and other.text == self.text

    __hash__ = None


def _block(text: str) -> str:
    """``text`` without the indentation of a triple-quoted string and without blank lines around it."""
    text = str(text)
    first, _, rest = text.partition("\n")
    return (first.strip() + ("\n" + textwrap.dedent(rest) if rest else "")).strip()


def markdown(text: str) -> Rendered:
    """Any Markdown built in a code cell (dedented), for the cell's output: use it as the last expression."""
    if not str(text).strip():
        raise ValueError("markdown() got empty text: give the Markdown the cell should show.")
    return Rendered(_block(text))


def takeaway(*points: str, closing: str = "") -> Rendered:
    """A take-away as rendered Markdown: one bullet per point (its later lines indented under it), then the
    ``closing`` paragraph. Use it as the last expression of a cell whose input is hidden."""
    if not points or not all(str(p).strip() for p in points):
        raise ValueError("takeaway() needs at least one point, none empty: give each bullet as one string.")
    bullets = []
    for point in points:
        lines = re.sub(r"^[-*]\s+", "", _block(point)).splitlines()  # a bullet given with its own marker
        bullets.append("- " + "\n".join([lines[0]] + ["  " + line.strip() for line in lines[1:]]))
    text = "\n".join(bullets)
    if str(closing).strip():
        text += "\n\n" + _block(closing)
    return Rendered(text)
