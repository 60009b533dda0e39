"""The running results table: every lesson adds its models, and the next lesson starts from it.

Rows live in a small JSON file per (dataset, scale) in the cache folder, so lesson 02's table
already holds lesson 01's models. The file is sealed with its checksum (:mod:`lmcourse.checksum`) and
replaced whole through a temporary file unique to the writer; a file that does not match its
checksum is moved aside (``.corrupt``) with one warning, never read as other numbers. A lesson shows its own rows and those of the lessons before it
(``show(lesson="04")``), never rows that a later lesson left in the file, in one table per regime (what
the rows were measured on: corpus, training tokens, sizes, epochs), so that no table ranks models trained
on different text. Published numbers from :mod:`lmcourse.literature` follow in a table of their own, each
with its source and table.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import literature as lit
from ..checksum import atomic_write, read_sealed_json, sealed_json
from ..config import DATASET, SCALE, cache_dir


@dataclass
class Row:
    model: str
    lesson: str
    valid_ppl: float | None
    test_ppl: float | None
    params: int | None = None
    note: str = ""
    regime: str = ""


REGIME_HEADING = "**Regime:**"  # the line above each regime's table (the results page reads it back)


def _num(v) -> str:
    """A table cell: blank for None, two decimals for a float, thousands separators for a count."""
    return "" if v is None else f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"


class Results:
    """``Results().add("KN5", "01", valid, test)``; ``.show()`` renders the table."""

    def __init__(self, dataset: str = DATASET, scale: str = SCALE, path: Path | None = None):
        self.dataset, self.scale = dataset, scale
        self.path = Path(path) if path else cache_dir() / f"results-{Path(str(dataset)).name}-{scale}.json"
        self.rows: list[Row] = self._read()

    def _read(self) -> list[Row]:
        """The stored rows; a damaged file is moved aside (``.corrupt``) with one warning, never lost."""
        if not self.path.exists():
            return []
        try:
            return [Row(**r) for r in self._rows_on_disk()]
        except (ValueError, TypeError, UnicodeDecodeError) as err:
            aside = self.path.with_name(self.path.name + ".corrupt")
            os.replace(self.path, aside)
            warnings.warn(f"The results file {self.path} was damaged ({' '.join(str(err).split())[:120]}); it was "
                          f"moved to {aside} and the table starts empty.", RuntimeWarning, stacklevel=3)
            return []

    def _rows_on_disk(self) -> list:
        """The rows of the sealed file (a file from before the seal, a bare list, is read as it is)."""
        text = self.path.read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            return json.loads(text)
        rows = read_sealed_json(self.path).get("rows")
        if not isinstance(rows, list):
            raise ValueError("no list of rows")
        return rows

    def clear_lesson(self, lesson: str) -> "Results":
        """Drop a lesson's rows (a rerun of that lesson replaces them)."""
        self.rows = [r for r in self.rows if r.lesson != lesson]
        return self

    def add(self, model: str, lesson: str, valid_ppl=None, test_ppl=None, params=None, note="",
            regime="") -> "Results":
        """Add (or replace) a row. ``regime`` says what the number was measured on (training tokens,
        sizes, epochs, corpus variant), so rows from different regimes are never read as one ladder."""
        self.rows = [r for r in self.rows if not (r.model == model and r.lesson == lesson)]
        f = lambda v: None if v is None else round(float(v), 2)  # noqa: E731
        self.rows.append(Row(model, lesson, f(valid_ppl), f(test_ppl), params, note, regime))
        self._save()
        return self

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = sealed_json({"format": 1, "rows": [asdict(r) for r in self.rows]})
        atomic_write(self.path, lambda f: f.write(data), needed=len(data))

    def best(self, exclude=("oracle",)) -> Row:
        """The model with the lowest test perplexity (the oracle left out)."""
        rows = [r for r in self.rows if r.test_ppl is not None and r.model not in exclude]
        return min(rows, key=lambda r: r.test_ppl)

    def markdown(self, lesson: str | None = None, literature=True) -> str:
        """The table as Markdown, one table per regime: rows of ``lesson`` and earlier lessons (all when None),
        under a heading naming the regime they were measured on, ``lesson``'s own regimes first and then the
        earlier ones in the order their lessons came, so that no table sets a model beside one trained on
        other text or at other sizes; in each, rows sorted by lesson and then from the highest test perplexity
        down, ``lesson``'s rows in bold. Last, in a table of their own, the published rows for the dataset
        (``literature``: True for all, False for none, or a list of model names as in
        :data:`lmcourse.literature.PUBLISHED`): the papers' full-size models."""
        rows = sorted((r for r in self.rows if lesson is None or r.lesson <= lesson),
                      key=lambda r: (r.lesson, -(r.test_ppl or 0)))
        lines = [f"**{self.dataset}**, scale `{self.scale}`"]
        for regime in self._regimes(rows, lesson):
            lines += ["", f"{REGIME_HEADING} {regime or 'not recorded'}", "",
                      "| model | lesson | params | valid ppl | test ppl | note |", "|---|---|---:|---:|---:|---|"]
            for r in (r for r in rows if r.regime == regime):
                name = f"**{r.model}**" if lesson is not None and r.lesson == lesson else r.model
                lines.append(f"| {name} | {r.lesson} | {_num(r.params)} | {_num(r.valid_ppl)} | {_num(r.test_ppl)} "
                             f"| {r.note} |")
        published = self._published(literature)
        if published:
            lines += ["", f"**Published:** the papers' full-size models on {self.dataset}, another regime again", "",
                      "| model | params | valid ppl | test ppl | source |", "|---|---:|---:|---:|---|"]
            lines += [f"| *{p.model}* | {p.params} | {_num(p.valid)} | {_num(p.test)} | {p.citation} |"
                      for p in published]
        return "\n".join(lines)

    @staticmethod
    def _regimes(rows: list, lesson: str | None) -> list:
        """The regimes of ``rows`` in the order the tables come: ``lesson``'s first, then by first appearance."""
        order = list(dict.fromkeys(r.regime for r in rows))
        own = [g for g in order if any(r.regime == g and r.lesson == lesson for r in rows)]
        return own + [g for g in order if g not in own]

    def _published(self, literature) -> list:
        if literature is False or literature is None:
            return []
        rows = lit.rows(str(self.dataset))
        if literature is True:
            return rows
        wanted = list(literature)
        missing = [m for m in wanted if m not in {p.model for p in rows}]
        if missing:
            raise KeyError(f"No published row {missing[0]!r} for {self.dataset!r}: see lmcourse.literature.PUBLISHED.")
        return [p for p in rows if p.model in wanted]

    def show(self, lesson: str | None = None, literature=True):
        """Render in a notebook (Markdown), or print the Markdown elsewhere; see :meth:`markdown`."""
        text = self.markdown(lesson, literature)
        try:
            from IPython.display import Markdown, display
            display(Markdown(text))
        except ImportError:
            print(text)
