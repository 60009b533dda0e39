"""The running results table: every lesson adds its models, and the next lesson starts from it.

Rows live in a small JSON file per (dataset, scale) in the cache folder, so lesson 02's table
already holds lesson 01's models. Published numbers sit beside them, each with its source.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .config import DATASET, SCALE, cache_dir

# Published test perplexities on PTB (word level, 10k vocabulary). Sources as in the course's refs.
LITERATURE = {
    "ptb": [
        ("KN5 (Mikolov et al. 2011)", None, 141.2),
        ("LSTM small, no dropout (Zaremba et al. 2014)", 120.7, 114.5),
        ("LSTM medium + dropout (Zaremba et al. 2014)", 86.2, 82.7),
        ("LSTM large + dropout (Zaremba et al. 2014)", 82.2, 78.4),
        ("Variational LSTM medium, MC (Gal & Ghahramani 2016)", None, 78.6),
        ("Large + weight tying (Press & Wolf 2017)", 77.7, 74.3),
        ("AWD-LSTM (Merity et al. 2017)", 60.0, 57.3),
    ],
    "wikitext-2": [
        ("AWD-LSTM (Merity et al. 2017)", 68.6, 65.8),
    ],
}


@dataclass
class Row:
    model: str
    lesson: str
    valid_ppl: float | None
    test_ppl: float | None
    params: int | None = None
    note: str = ""


class Results:
    """``Results().add("KN5", "01", valid, test)``; ``.show()`` renders the table."""

    def __init__(self, dataset: str = DATASET, scale: str = SCALE, path: Path | None = None):
        self.dataset, self.scale = dataset, scale
        self.path = Path(path) if path else cache_dir() / f"results-{Path(str(dataset)).name}-{scale}.json"
        self.rows: list[Row] = []
        if self.path.exists():
            self.rows = [Row(**r) for r in json.loads(self.path.read_text())]

    def clear_lesson(self, lesson: str) -> "Results":
        """Drop a lesson's rows (a rerun of that lesson replaces them)."""
        self.rows = [r for r in self.rows if r.lesson != lesson]
        return self

    def add(self, model: str, lesson: str, valid_ppl=None, test_ppl=None, params=None, note="") -> "Results":
        self.rows = [r for r in self.rows if not (r.model == model and r.lesson == lesson)]
        f = lambda v: None if v is None else round(float(v), 2)  # noqa: E731
        self.rows.append(Row(model, lesson, f(valid_ppl), f(test_ppl), params, note))
        self._save()
        return self

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(r) for r in self.rows], indent=1))
        os.replace(tmp, self.path)

    def best(self, exclude=("oracle",)) -> Row:
        """The model with the lowest test perplexity (the oracle left out)."""
        rows = [r for r in self.rows if r.test_ppl is not None and r.model not in exclude]
        return min(rows, key=lambda r: r.test_ppl)

    def markdown(self, literature: bool = True) -> str:
        lines = [f"**{self.dataset}**, scale `{self.scale}`", "",
                 "| model | lesson | params | valid ppl | test ppl | note |", "|---|---|---:|---:|---:|---|"]
        num = lambda v: "" if v is None else f"{v:,.2f}" if isinstance(v, float) else f"{v:,}"  # noqa: E731
        for r in sorted(self.rows, key=lambda r: (r.lesson, -(r.test_ppl or 0))):
            lines.append(f"| {r.model} | {r.lesson} | {num(r.params)} | {num(r.valid_ppl)} | {num(r.test_ppl)} | {r.note} |")
        for name, v, t in LITERATURE.get(str(self.dataset), []) if literature else []:
            lines.append(f"| *{name}* | paper |  | {num(v)} | {num(t)} | published |")
        return "\n".join(lines)

    def show(self, literature: bool = True):
        """Render in a notebook (Markdown), or print the Markdown elsewhere."""
        try:
            from IPython.display import Markdown, display
            display(Markdown(self.markdown(literature)))
        except ImportError:
            print(self.markdown(literature))
