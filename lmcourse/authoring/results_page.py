"""The book's results page: the course's ladder beside the papers' numbers, every figure read, none typed.

::

    python -m lmcourse.authoring.results_page [--out book]     # make book writes it too

``results.html`` holds four things:

- **the ladder** of lesson 09 (:mod:`lmcourse.course.runs.lesson09`) at ``cpu`` scale: each rung's test and
  validation perplexity as the mean ± standard deviation over its seeds, and the regime it was measured
  in. The numbers are measured when the page is built, from the committed reference runs
  (``reference_runs/09-ladder-*``, ``09-wrappers-*``): each trained rung is loaded and scored on the
  ladder corpus's text, the test-time rungs are read from their stored measurements, KN5 is counted
  afresh and the oracle gives the floor. Nothing is trained: a missing run stops the build with one
  sentence;
- **each lesson's headline numbers**: the rows the lesson added to the running results table, read
  from the table its stored notebook shows (so they are what ``make lessons`` last produced);
- **the papers' rows**, each with its source and table, from :mod:`lmcourse.literature`: the 2017-18
  models the course rebuilds, then the records since;
- **one figure**: the ladder's bars with the seeds' spread and the floor, beside the papers' chains.

The README's headline figure, ``docs/ladder.png``, is the ladder alone with the oracle floor, drawn by
:func:`write_ladder_figure` from the same measured numbers (which it also carries, rounded, in the PNG's
``Description``, so a test can check that the committed picture is what the committed runs give)::

    python -m lmcourse.authoring.results_page --figure docs/ladder.png
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Optional, Sequence

from .. import EXIT_INTERRUPTED, _ctrl_c_raises, config
from .. import literature as lit
from ..checksum import atomic_write
from ..corpora.grammar import Params
from ..corpora.oracle import Oracle
from ..course.results import REGIME_HEADING
from ..course.runs import course_model, lesson09 as L
from ..course.seeds import mean_sd
from ..errors import MissingFileError
from ..lm import perplexity
from ..ngram.model import NGramLM
from ..store import reference_runs as reference
from ..store.stored_numbers import compute_or_load
from ..store.stored_runs import run_key
from .lessons import lesson_id, lessons

PAGE = "results.html"
LADDER_SCALE = "cpu"  # the scale of the committed reference runs
# The papers' rows shown, in order: what the course rebuilds (2017-18), then the records since.
PAPERS_2017_18 = ("KN5", "AWD-LSTM", "AWD-LSTM + cache", "AWD-LSTM + dynamic evaluation", "AWD-LSTM + MoS",
                  "AWD-LSTM + MoS + dynamic evaluation")
# Each paper's chain on PTB for the figure: a base model and what its own paper added to it.
CHAINS = (("Merity et al. 2018", ("AWD-LSTM", "AWD-LSTM + cache")),
          ("Krause et al. 2018", ("AWD-LSTM", "AWD-LSTM + dynamic evaluation")),
          ("Yang et al. 2018", ("AWD-LSTM + MoS", "AWD-LSTM + MoS + dynamic evaluation")),
          ("Melis et al. 2020", ("Mogrifier LSTM", "Mogrifier LSTM + dynamic evaluation")))


@contextmanager
def _at_scale(scale: str):
    """Run keys name the scale and corpus they were trained at: read the ``scale`` runs whatever this process's."""
    before = config.SCALE, config.DATASET
    config.SCALE, config.DATASET = scale, config.EMBEDDED
    try:
        yield
    finally:
        config.SCALE, config.DATASET = before


def _missing(what: str) -> MissingFileError:
    return MissingFileError(f"The stored {what} of lesson 09's ladder is not in reference_runs/: restore it with "
                            "`git checkout reference_runs`, or train it with `make runs LESSONS=09`.")


def ladder_numbers(scale: str = LADDER_SCALE) -> dict:
    """Lesson 09's ladder from its stored runs: ``{"rungs": {rung: {"valid": [..], "test": [..]}}, "floor":
    {split: ppl}, "regime": str, "seeds": [..]}``; one number per seed (KN5: one, it has no seed)."""
    with _at_scale(scale):
        shared = L.shared_settings(scale)
        params = Params(**shared["corpus"])
        corpus = L.ladder_corpus(params)
        splits = {s: getattr(corpus, s) for s in ("valid", "test")}
        kn5 = NGramLM(corpus.vocab, order=5, smoothing="mkn", mode="stream").fit(corpus.train)
        rungs = {"KN5": {s: [perplexity(kn5, x)] for s, x in splits.items()}}
        for rung in L.TRAINED:
            rungs[rung] = {"valid": [], "test": []}
            for seed in L.SEEDS:
                settings = L.rung_settings(rung, seed, shared)
                key = run_key(course_model.NAME, settings, corpus.vocab, scale, config.EMBEDDED)
                found = reference.load(course_model.NAME, key, corpus.vocab)
                if found is None:
                    raise _missing(f"run of rung {rung!r}, seed {seed},")
                model = found[0].eval()
                for s, x in splits.items():
                    rungs[rung][s].append(perplexity(model, x))
        wrapped = [json.loads(compute_or_load("09-wrappers", L.wrapper_settings(seed, shared),
                                              lambda: (_ for _ in ()).throw(_missing("wrappers' numbers")),
                                              corpus.vocab, recompute=False, scale=scale,
                                              dataset=config.EMBEDDED)["json"]) for seed in L.SEEDS]
        for rung in ("+ cache", "+ dynamic evaluation"):
            rungs[rung] = {s: [w["ppl"][rung][s] for w in wrapped] for s in splits}
        oracle = Oracle(corpus.vocab, params)
        floor = {s: perplexity(oracle, x) for s, x in splits.items()}
    regime = f"{course_model.regime(shared, corpus)} at <code>{scale}</code>, {len(L.SEEDS)} seeds a trained rung"
    return {"rungs": {r: rungs[r] for r in L.RUNGS}, "floor": floor, "regime": regime, "seeds": list(L.SEEDS)}


def stored_table(nb: dict) -> list[dict]:
    """The rows of the last results table a stored notebook shows (``| model | lesson | ... |``), as dicts: one
    table per regime under its ``**Regime:**`` heading (:meth:`lmcourse.course.results.Results.markdown`),
    the regime in each row's ``"regime"``; the published rows' table (no lesson column) is left out."""
    rows = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = "".join(output.get("data", {}).get("text/markdown", ""))
            if "| model | lesson |" in text:
                rows = _table_rows(text) or rows
    return rows


def _table_rows(text: str) -> list[dict]:
    """The rows of every ``| model | lesson |`` table in ``text``, each with the regime its heading names."""
    found, header, regime = [], None, ""
    for line in text.splitlines():
        if line.startswith(REGIME_HEADING):
            regime = line[len(REGIME_HEADING):].strip()
            regime = "" if regime == "not recorded" else regime
        if not line.startswith("|"):
            header = None                                  # a table ends at its first line of other text
            continue
        if line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if header is None:
            header = cells
        elif len(cells) == len(header) and header[:2] == ["model", "lesson"]:
            found.append({"regime": regime, **dict(zip(header, cells))})
    return found


def headline_rows(path: Path) -> list[dict]:
    """The rows lesson ``path`` adds to the results table (its own, shown in bold), from its stored outputs."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    me = lesson_id(path)
    own = []
    for row in stored_table(nb):
        if row.get("lesson") == me or (me == "02b" and row.get("lesson") == "02"):
            own.append({**row, "model": row["model"].strip("*")})
    return own


def _num(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.2f}"


def _figure(ladder: dict) -> str:
    """The page's one figure as a PNG data URI: the course's ladder (left), the papers' chains (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rungs = list(ladder["rungs"])
    means = [mean_sd(ladder["rungs"][r]["test"]) for r in rungs]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw=dict(width_ratios=[1.6, 1]))
    ax.bar(range(len(rungs)), [m for m, _ in means], yerr=[sd for _, sd in means], capsize=4, color="#4c78a8")
    ax.axhline(ladder["floor"]["test"], color="k", ls="--", lw=1, label=f"oracle floor {ladder['floor']['test']:.1f}")
    ax.set_xticks(range(len(rungs)), rungs, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("test perplexity (mean ± sd over seeds)")
    ax.set_title("The course's ladder (embedded ladder corpus, cpu)")
    ax.legend(fontsize=8)
    for paper, chain in CHAINS:
        values = [lit.published("ptb", m).test for m in chain]
        bx.plot([0, 1], values, "o-", label=paper)
    bx.set_xticks([0, 1], ["base model", "+ its paper's addition"])
    bx.set_ylabel("PTB test perplexity")
    bx.set_title("The papers' chains (Penn Treebank, full size)")
    bx.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def figure_numbers(ladder: dict) -> dict:
    """What the headline figure draws, rounded to two decimals: each rung's test mean and sd, and the floor."""
    rungs = {}
    for rung, scores in ladder["rungs"].items():
        mean, sd = mean_sd(scores["test"])
        rungs[rung] = [round(mean, 2), round(sd, 2) if len(scores["test"]) > 1 else None]
    return {"rungs": rungs, "floor": round(ladder["floor"]["test"], 2), "seeds": len(ladder.get("seeds", []))}


def write_ladder_figure(path: Path, ladder: Optional[dict] = None) -> Path:
    """Draw the README's headline figure into ``path`` (a PNG, replaced whole): the course's ladder at ``cpu``,
    each rung's test perplexity as the mean ± sd over its seeds, with the oracle's floor; ``ladder`` defaults to
    :func:`ladder_numbers` (measured from the committed runs). The numbers drawn go into the PNG's
    ``Description`` as JSON (:func:`figure_numbers`); no date or version is written, so the same numbers give
    the same file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ladder = ladder_numbers() if ladder is None else ladder
    drawn = figure_numbers(ladder)
    rungs = list(drawn["rungs"])
    means = [drawn["rungs"][r][0] for r in rungs]
    sds = [drawn["rungs"][r][1] or 0.0 for r in rungs]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(range(len(rungs)), means, yerr=sds, capsize=4, color="#4c78a8")
    for i, m in enumerate(means):
        ax.text(i, m, f"{m:.1f}", ha="center", va="bottom", fontsize=8, color="#333")
    ax.axhline(drawn["floor"], color="k", ls="--", lw=1, label=f"oracle floor {drawn['floor']:.1f} (the best any model can do)")
    ax.set_xticks(range(len(rungs)), rungs, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("test perplexity")
    ax.set_ylim(0, max(means) * 1.15)
    ax.set_title(f"The course's ladder: each rung adds one idea ({drawn['seeds']} seeds a rung, mean ± sd)", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100,
                metadata={"Software": None, "Description": json.dumps(drawn, sort_keys=True),
                          "Title": "lmcourse: the course's ladder with the oracle floor"})
    plt.close(fig)
    return atomic_write(path, buffer.getvalue())


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = lambda tag, row: "".join(f"<{tag}>{c}</{tag}>" for c in row)  # noqa: E731
    return (f"<table><thead><tr>{cells('th', head)}</tr></thead><tbody>"
            + "".join(f"<tr>{cells('td', r)}</tr>" for r in rows) + "</tbody></table>")


def ladder_table(ladder: dict) -> str:
    rows, below = [], None
    for rung, scores in ladder["rungs"].items():
        (vm, vsd), (tm, tsd) = mean_sd(scores["valid"]), mean_sd(scores["test"])
        seeded = len(scores["test"]) > 1                      # a count model (KN5) has one score, no spread
        spread = f" ± {tsd:.2f}" if seeded else " (counts, no seed)"
        change = f"{100 * (tm / below - 1):+.1f}%" if below else ""
        rows.append([html.escape(rung), f"{vm:.2f}" + (f" ± {vsd:.2f}" if seeded else ""),
                     f"{tm:.2f}{spread}", change])
        below = tm
    rows.append(["<em>oracle (the floor)</em>", _num(ladder["floor"]["valid"]), _num(ladder["floor"]["test"]), ""])
    return _table(["rung", "valid", "test", "change"], rows)


def papers_table() -> str:
    known = {(r.dataset, r.model) for r in lit.PUBLISHED}
    chosen = [lit.published(d, m) for d in ("ptb", "wikitext-2") for m in PAPERS_2017_18 if (d, m) in known]
    chosen += [r for r in lit.PUBLISHED if r.note == lit.SINCE_2018]
    rows = [[{"ptb": "PTB", "wikitext-2": "WikiText-2"}[r.dataset], html.escape(r.model), r.params, _num(r.valid),
             _num(r.test), html.escape(r.citation)] for r in chosen]
    return _table(["corpus", "model", "params", "valid", "test", "source"], rows)


def headline_section(paths: Sequence[Path]) -> str:
    parts = []
    for path in paths:
        rows = headline_rows(path)
        if not rows:
            continue
        body = [[html.escape(r["model"]), html.escape(r.get("regime", "")), r.get("params", ""), r.get("valid ppl", ""),
                 r.get("test ppl", ""), html.escape(r.get("note", ""))] for r in rows]
        parts.append(f'<h3><a href="{path.stem}.html">{html.escape(path.stem)}</a></h3>'
                     + _table(["model", "regime", "params", "valid", "test", "note"], body))
    return "".join(parts)


def page(ladder: dict, paths: Sequence[Path]) -> str:
    """The whole page as HTML (self-contained: the figure is embedded)."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>lmcourse: results</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 64rem; margin: 2rem auto; padding: 0 1rem; color: #222; line-height: 1.5; }}
table {{ border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: left; vertical-align: top; }}
img {{ max-width: 100%; }} code {{ background: #f3f3f3; padding: 0 3px; }}
</style></head>
<body>
<p><a href="index.html">&larr; the lessons</a></p>
<h1>Results: the course's ladder beside the papers</h1>
<p>Every number on this page is read, none typed: the ladder is measured from the runs committed in
<code>reference_runs/</code> when the page is built, each lesson's rows come from the table its stored
notebook shows, and the papers' rows from <code>lmcourse/literature.py</code>, each with its source.
The course's numbers are on a generated corpus with small models; the papers' are on Penn Treebank and
WikiText-2 with full-size ones, so compare the steps, not the levels.</p>
<h2>The ladder (lesson 09)</h2>
<p>Regime: {ladder['regime']}. Mean ± standard deviation over the seeds; the change is from the rung above.</p>
{ladder_table(ladder)}
<img alt="The course's ladder, bars with the seeds' spread and the oracle floor, beside the papers' chains on
PTB" src="{_figure(ladder)}">
<h2>Each lesson's headline numbers</h2>
<p>The rows each lesson adds to the running results table, with the regime it measured them in.</p>
{headline_section(paths)}
<h2>The papers</h2>
<p>The 2017-18 models the course rebuilds, then the records on the same corpora since (test perplexity;
word level).</p>
{papers_table()}
</body></html>
"""


def write(out: Path, paths: Sequence[Path] = ()) -> Path:
    """Measure the ladder, read the rest, and write ``out/results.html`` atomically; its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = page(ladder_numbers(), list(paths) or lessons())
    return atomic_write(out / PAGE, text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.results_page", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="book", help="the folder to write (default: book)")
    parser.add_argument("--figure", default=None, type=Path,
                        help="write only the README's headline figure (the ladder and the floor) to this PNG")
    _ctrl_c_raises()
    args = parser.parse_args(argv)
    try:
        if args.figure is not None:
            print(f"wrote {write_ladder_figure(args.figure)}")
            return 0
        print(f"open {write(Path(args.out))}")
    except MissingFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nerror: interrupted; the page is written whole or not at all.", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
