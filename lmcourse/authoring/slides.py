"""Every lesson as a slide show: the demo path, declared here and stamped onto the notebooks.

A lesson is presented live in JupyterLab with RISE (``jupyterlab_rise``): Alt+R turns the notebook into
reveal.js slides, and each cell becomes what its ``metadata.slideshow.slide_type`` says. The
**demo path** of a lesson is the ten minutes an instructor shows: the claim, the derivation on screen,
the figure, the widget and the number that matters. Every other cell is ``skip``: it stays in the
notebook, runs with Run All, and is not shown in the slide view.

The path is declared below as cell ids (cells carry stable ``id``s), one tuple per lesson, each entry
``(cell id, slide type)`` with the types of RISE and nbconvert:

- ``slide``: a new slide (left-right); ``subslide``: a new slide below it (up-down);
- ``fragment``: appears on the next key press on the same slide; ``-``: continues the slide.

**Hidden inputs.** A cell whose Python only formats what it shows (a take-away built from the lesson's
numbers, see :mod:`lmcourse.course.rendered`) is listed in ``HIDDEN``: its input is hidden in the notebook
view, on the RISE slides and in the static decks and book (the cell metadata ``jupyter.source_hidden``,
JupyterLab's own flag). The stamp writes that flag too, on the cells listed and on no other, so an input
collapsed or expanded by accident in JupyterLab is put back by the next stamp.

Because other edits move and add cells, the stamps are written by a command that can be re-run at any
time (``make lessons`` runs it before saving), and ``tests/test_slides.py`` fails when a committed
notebook's stamps differ from this declaration or a declared id no longer exists::

    python -m lmcourse.authoring.slides stamp [LESSON ...]     # write the declared stamps (idempotent)
    python -m lmcourse.authoring.slides check [LESSON ...]     # status 1 when a notebook differs
    python -m lmcourse.authoring.slides summary [LESSON ...]   # each demo path: slides and minutes

A demo path runs from the stored runs: after Run All (which loads them), every code cell on it answers
within about ten seconds at ``cpu``; the cells that train when no stored run matches are off the path.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Optional, Sequence

from .. import EXIT_INTERRUPTED, _ctrl_c_raises
from ..checksum import atomic_write
from ..course.catalog import NOTEBOOKS, check_writable, lesson_id, lessons
from ..course.rendered import hide_input, input_hidden

SLIDE, SUB, FRAGMENT, ON = "slide", "subslide", "fragment", "-"
SKIP = "skip"
TYPES = (SLIDE, SUB, FRAGMENT, ON, "notes", SKIP)
# Presenting time, in seconds, by what a key press brings: a new slide is talked through, a fragment
# adds a sentence; the waits of the cells themselves are read from the stored outputs (progress bars).
SPEAKING_S = {SLIDE: 60, SUB: 45, FRAGMENT: 20, ON: 0}

DEMO: dict[str, tuple[tuple[str, str], ...]] = {
    "01": (("c000", SLIDE),                                                  # the claim
           ("r01-corpus", SLIDE), ("r01-corpus-card", ON),                    # the corpus, its oracle and floor
           ("r01-ppl", SLIDE), ("c005", ON), ("c006", FRAGMENT),              # perplexity: 1 and V; score()
           ("r01-counts", SLIDE), ("c007", ON),                               # unseen n-grams by order (figure)
           ("c008", SLIDE), ("c009", ON),                                     # maximum likelihood's zeros
           ("c010", SLIDE), ("c011", FRAGMENT),                               # add-k: an unseen history gets 1/V
           ("c012", SLIDE), ("c013", ON),                                     # best k per order (figure)
           ("r01-backoff", SLIDE), ("r01-backoff-fig", ON),                   # interpolation, drawn (diagram)
           ("c016", SLIDE), ("c017", FRAGMENT), ("c018", FRAGMENT),           # Kneser-Ney derived on screen
           ("r01-mkn", SLIDE), ("c019", ON),                                  # modified KN's three discounts
           ("r01-order", SLIDE), ("c021", ON), ("c022", ON), ("c023", FRAGMENT),  # perplexity against order
           ("r01-ptb", SLIDE), ("r01-ptb-kn5", ON), ("r01-ptb-after", FRAGMENT),  # KN5 on Penn Treebank
           ("c025", SLIDE), ("c026", ON),                                     # samples
           ("c027", SLIDE), ("r01-table", ON), ("r01-table-read", FRAGMENT),  # the numbers; sentence mode
           ("c029", SLIDE)),                                                  # what to take away
    "02": (("c000", SLIDE), ("c003", SLIDE), ("c004", FRAGMENT),              # the claim; the equations, coded
           ("r02-cell", SLIDE), ("r02-cell-fig", ON),                         # the cell, drawn (diagram)
           ("c005", SLIDE), ("c006", ON), ("c007", FRAGMENT),                 # checked against torch.nn.LSTM
           ("r02-grad", SLIDE), ("r02-gradpath", ON),                         # the gradient's two paths (diagram)
           ("r02-products", SLIDE),                                           # the two products
           ("r02-measure", SLIDE), ("c008", ON), ("c009", ON), ("c010", FRAGMENT),  # gradient against lag
           ("r02-exact", SLIDE), ("c011", ON),                                # exactly the product of forget gates
           ("c012", SLIDE), ("c013", ON),                                     # the forget bias decides
           ("c020", SLIDE), ("c021", ON), ("r02-clipfig", ON), ("c022", FRAGMENT),  # clipping, measured (figure)
           ("r02-takeaway", SLIDE), ("r02-takeaway-t", ON)),                  # what to take away
    "02b": (("c000", SLIDE), ("c00m", SLIDE), ("c00d", ON),                   # the claim; the LSTM cell (diagram)
            ("c00s", SLIDE), ("c008", ON), ("c009", FRAGMENT),                # samples along training (seed 0)
            ("c009b", SLIDE), ("c012", ON), ("c012m", FRAGMENT),              # three seeds against the KN 7-gram
            ("c016", SLIDE), ("c017", ON),                                    # decoding; temperature (figure)
            ("c018", SLIDE), ("c019", ON), ("c020", ON),                      # three temperatures; the slider
            ("c023s", SLIDE), ("c023t", ON), ("c023r", FRAGMENT),             # greedy and beam search: they loop
            ("c027h", SLIDE), ("c027c", ON), ("c027f", ON), ("c027m", FRAGMENT),  # corpus card; overfitting
            ("c028", SUB),                                                    # reading the curves
            ("c029", SLIDE), ("c030f", ON), ("c031", FRAGMENT),               # the forget gates learned (figure)
            ("c032", SLIDE), ("c035", ON), ("c036", FRAGMENT),                # agreement at a distance (figure)
            ("c038", SLIDE), ("c038t", ON)),                                  # what to take away
    "03": (("c000", SLIDE), ("r03-masks-md", SLIDE), ("r03-masks", ON),       # the claim; four masks (diagram)
           ("c004", SLIDE), ("c005", ON), ("c006", FRAGMENT),                 # standard against locked masks
           ("c008", SLIDE), ("c009", ON), ("c010", FRAGMENT),                 # embedding dropout (figure)
           ("r03-wd-md", SLIDE), ("c011", ON),                                # weight drop: the mask on W_hh
           ("r03-rec-md", SLIDE), ("r03-rec-md3", FRAGMENT), ("r03-rec-pic", ON),  # masks on h_(t-1), over t
           ("c018", SLIDE), ("r03-card", ON), ("c021", ON),                  # eight variants, their corpus, loaded
           ("d06a776c", SLIDE), ("473429c6", ON), ("f2b5e451", FRAGMENT),     # the curves: alone
           ("r03-curves2-md", SLIDE), ("r03-curves2", ON), ("r03-curves2-read", FRAGMENT),  # inside the full model
           ("r03-test-md", SLIDE), ("bcd15267", ON), ("r03-test-table", FRAGMENT),  # test perplexity over the seeds
           ("r03-rung-why", FRAGMENT),                                        # the rungs here and in 02b, 04
           ("fc16cd75", SLIDE), ("r03-claims", ON),                           # the papers' directions, to the rule
           ("r03-ptb-md", SLIDE), ("r03-ptb-load", ON),                       # Penn Treebank: the corpus card
           ("r03-ptb-fig-md", SLIDE), ("r03-ptb-fig", ON),                    # training against validation
           ("r03-ptb-row-md", SLIDE), ("r03-ptb-table", ON),                  # the row and its verdict
           ("r03-ptb-fit", "notes"), ("r03-ptb-read", "notes"),               # the overfitting ratios; how to read it
           ("e8a10b93", SLIDE), ("ca7e9f15", ON), ("r03-lit-read", FRAGMENT), # beside the literature; the order here
           ("3e7cfcdb", SLIDE), ("r03-takeaway", ON)),                        # what to take away
    "04": (("c000", SLIDE), ("r04-tied-md", SLIDE), ("r04-tied", ON),       # the claim; one matrix, two roles (diagram)
           ("c004", SLIDE), ("c005", ON), ("c006", FRAGMENT), ("c007", ON),  # one Parameter; its gradient, a sum
           ("c010", SLIDE), ("c011", ON),                                     # where the parameters sit (figure)
           ("e4a1c017", SLIDE), ("e4a1c018", ON), ("r04-tie-table", ON),     # untied against tied, seeds' spread
           ("e4a1c020", FRAGMENT),                                            # the curves and the seeds (figure)
           ("e4a1c021", SLIDE), ("r04-freq-fig", ON),                        # where it pays: rare words (figure)
           ("r04-freq-read", FRAGMENT),
           ("r04-papers-md", SLIDE), ("c020", ON),                            # the papers' pairs
           ("c025", SLIDE), ("c026", ON), ("r04-neigh-answer", FRAGMENT),    # the neighbours explorer; the answer
           ("r04-ptb-md", SLIDE), ("r04-ptb-load", ON), ("r04-ptb-table", ON),  # Penn Treebank: the tie's row
           ("c029", SLIDE), ("e4a1c029", ON)),                                # what to take away
    "05": (("89c26d93", SLIDE),                                               # the claim
           ("05-bottleneck-md", SLIDE), ("05-bottleneck", ON),                # the factorisation (diagram)
           ("c986541b", SLIDE), ("48cdf944", ON),                             # the true matrix A, its corpus card
           ("463a024d", SLIDE), ("33ccfe1e", ON),                             # rank(HW^T) <= d (spectra)
           ("44b1cdf5", SLIDE), ("adb7382e", ON),                             # a shift adds at most 1 (measured)
           ("05-ceiling-text", FRAGMENT),                                     # d + 2 is a ceiling: why not 98
           ("78ca01a2", SLIDE), ("d2a5732d", ON), ("43614684", FRAGMENT),     # the rank of the truth
           ("c3346220", SLIDE), ("b5df1043", ON), ("11793a5d", FRAGMENT),     # KL against d (figure)
           ("5ffab446", SLIDE), ("a6c8e787", ON),                             # the rank explorer
           ("05-trained-md", SLIDE), ("05-rich-card", ON),                    # trained models: their corpus's card
           ("05-trained-curves", ON),                                         # their stored curves (figure)
           ("adf2dade", SLIDE), ("36b39237", ON), ("05-bound-table", FRAGMENT),  # beside the best fit (figure)
           ("05-spectra-md", SLIDE), ("55795759", ON), ("8b04fd15", FRAGMENT),   # their spectra stop at d
           ("f4ae59d1", SLIDE)),                                              # what to take away
    "06": (("a744e7a0", SLIDE), ("4c64e531", ON),                             # the claim and the papers' rows
           ("06-data-md", SLIDE), ("06-rich-card", ON),                      # the data: lesson 05's variant (card)
           ("06-head-md", SLIDE), ("06-head", ON),                            # the head (diagram)
           ("5f0dc960", SLIDE), ("e82eebde", ON),                             # the mixture, written out
           ("ba7fc8ec", SLIDE), ("cc403cd4", ON), ("06-rank-random-text", FRAGMENT),  # its rank beyond d (spectra)
           ("b75dfd2e", SLIDE), ("0c4a3760", ON), ("202629da", FRAGMENT),     # fitted to the truth
           ("650ae526", SLIDE), ("2132f411", ON),                             # trained side by side (figure)
           ("9a0bb91e", SLIDE), ("ee747ec7", ON), ("06-groups-figure", ON),   # where it helps: the lookups
           ("22c117c8", FRAGMENT),
           ("06-rank-trained-md", SLIDE), ("06-rank-trained-figure", ON),     # the trained ranks (spectra)
           ("531335d1", FRAGMENT),
           ("4c018c35", SLIDE), ("efc2c487", ON),                             # the cost, measured
           ("a99d6553", SLIDE), ("894a0243", ON)),                            # what to take away
    "07": (("d41f2d57", SLIDE), ("b0ede868", ON),                             # the claim; the papers' changes
           ("48ad12cb", SLIDE), ("c8d6843e", ON), ("26064731", FRAGMENT),     # the cache as attention (diagram)
           ("8854e16b", SLIDE), ("41accb49", ON), ("35247d34", FRAGMENT), ("dd6a6dbf", ON),  # the cache, coded
           ("a8c7a4f4", SLIDE), ("25c8e368", ON), ("ccfb4035", ON), ("5e1a07c1", ON),  # theta and lambda (heat map)
           ("07-tuning-read", FRAGMENT),
           ("233032af", SLIDE), ("7838bead", ON), ("6e562954", ON), ("c8f5c4c3", FRAGMENT),  # who gains: names
           ("52892dca", SLIDE), ("1f06da74", ON), ("07-explorer-read", ON),   # the attention explorer, read
           ("07-explorer-live", SLIDE), ("0da882bc", ON),                     # the explorer, live
           ("38ca9935", SLIDE), ("3c97c4fc", ON), ("07-test-read", ON),       # the test change over seeds
           ("e354dcff", SLIDE), ("f21a9998", ON), ("452afde7", FRAGMENT),     # Penn Treebank: tuned, the change
           ("07-ptb-papers-md", SLIDE), ("a6d12821", ON), ("07-ptb-papers-read", "notes"),  # beside the papers
           ("3e876777", SLIDE), ("0495560a", ON), ("bdefbb5b", ON),           # the explorer on Penn Treebank
           ("b85879bd", SLIDE), ("2d74acbc", ON)),                            # what to take away
    "08": (("ac77f668", SLIDE),                                               # the claim
           ("cc3af303", SLIDE), ("8b7a2346", ON),                             # along the stream (diagram)
           ("7678d48d", SLIDE), ("c0f0fd2f", ON),                             # the update rule, by hand
           ("006149ba", SLIDE), ("bd32cf3e", ON), ("c3afca99", FRAGMENT),     # why the order matters
           ("40e10bec", SLIDE), ("578694f1", ON), ("2ec45947", FRAGMENT),     # the rates, tuned (figure)
           ("08-decay-read", FRAGMENT),                                       # the decay the grid picks
           ("41170763", SLIDE), ("ec194833", ON),                             # SGD against the RMS rule (figure)
           ("32878f15", SLIDE), ("0ddf8d95", ON), ("44a81cee", ON),           # adaptation or more training
           ("51e948dc", SLIDE), ("d2c3f745", ON), ("bb44924d", ON), ("dc3541b2", FRAGMENT),  # where in a document
           ("4ba95568", SLIDE), ("f17146d2", ON), ("0afcfd50", ON), ("f6180597", FRAGMENT),  # reset at every document
           ("21915fd8", SLIDE), ("7d81f07b", ON), ("4b5f33b1", FRAGMENT),     # Penn Treebank: the seeds, the control
           ("97c23764", SLIDE), ("07fe00b6", ON),                             # beside the papers
           ("5192d832", SLIDE), ("c7ae9622", ON)),                            # what to take away
    "09": (("8b6c15ea", SLIDE),                                               # the claim: the ladder
           ("09-rungs", SLIDE), ("09-rungs-table", ON),                       # what each rung adds (table)
           ("5eb86e4a", SLIDE), ("9afd36b8", ON),                             # NT-ASGD's trigger on screen
           ("8fc0ba4d", SLIDE), ("61091d21", ON),                             # variable BPTT (figure)
           ("e48560dc", SLIDE), ("03c39d8f", ON), ("005d8411", "notes"), ("59a3d7da", ON),  # the ladder (table)
           ("09a1c0e1", SLIDE), ("09a1c0e2", ON),                             # the ladder, drawn (diagram)
           ("f502e3df", SLIDE), ("f46a2800", ON),                             # every validation curve
           ("09a1c0f0", SLIDE), ("09a1c0f1", ON),                             # the mixture at the lookups, beside 06
           ("09a1c0e4", SLIDE), ("09a1c0e7", ON),                             # the ladder on Penn Treebank (figure)
           ("09a1c0e8", SLIDE), ("09a1c0e9", ON), ("09-ptb-steps-papers", "notes"),  # our steps, the papers' steps
           ("f0bde711", SLIDE), ("09a1c0ec", ON)),                            # what to take away
    "10": (("42c60c96", SLIDE),                                               # the claim: the cache already attends
           ("4f8abbe5", SLIDE), ("6a69b09c", ON),                             # the cache as attention, through torch
           ("44e71592", SLIDE), ("10a1c0e0", ON), ("10-transformer-line", FRAGMENT),  # the attention block (diagram)
           ("10a1c0e1", SLIDE), ("3e710573", ON),                             # causal attention vs the fused kernel
           ("643a6b41", SLIDE), ("6bad3fba", ON),                             # the ladder with the Transformer
           ("10-equal-time-md", SLIDE), ("10a1c0e4", ON), ("04b06b7b", FRAGMENT),  # the equal-time budget; the curves
           ("10a1c0e2", SLIDE), ("9c31d35a", ON),                             # the heads explorer
           ("10a1c0e3", SLIDE), ("4283d270", ON),                             # what the lesson measured
           ("49172fd0", SLIDE)),                                              # what to take away
}

# Cells whose input is hidden everywhere (their output shows alone), per lesson; any cell of the lesson may be
# listed, on the demo path or off it. A lesson not named here hides no input.
HIDDEN: dict[str, tuple[str, ...]] = {
    "01": ("r01-corpus-card", "r01-backoff-fig", "c022", "r01-table", "r01-table-read"),  # the corpus card; a diagram;
                                                   # a figure; the results table and its reading
    "02": ("r02-cell-fig", "r02-gradpath", "c009", "r02-clipfig", "r02-takeaway-t"),  # two diagrams; two figures;
                                                   # the take-away
    "02b": ("c00d", "c008", "c009", "c009s", "c012", "c012m", "c017", "c019", "c020", "c023t", "c027c", "c027f", "c027m",
            "c030f", "c035", "c038t"),
    "03": ("r03-card", "r03-curves2-read", "bcd15267", "r03-test-table", "r03-test-full", "r03-rung-why",
           "r03-claims", "r03-claims-gaps", "r03-more", "r03-ptb-fig", "r03-ptb-table", "r03-ptb-fit", "ca7e9f15", "r03-lit-read", "r03-takeaway"),
    "04": ("c011", "r04-tie-table", "r04-tie-more", "e4a1c020", "r04-freq-fig", "r04-freq-table", "r04-freq-read", "c020",
           "r04-neigh-answer", "r04-ptb-table", "e4a1c029"),
    "05": ("05-bottleneck", "5c4f3d6c", "05-ceiling-text", "43614684", "11793a5d", "05-rich-card", "05-trained-curves", "36b39237",
           "05-bound-table", "55795759", "8b04fd15"),
    "06": ("06-rich-card", "06-head", "06-rank-random-text", "0c4a3760", "202629da", "2132f411", "ee747ec7", "06-groups-figure",
           "22c117c8", "06-rank-trained-figure", "531335d1", "efc2c487", "894a0243"),
    "07": ("c8d6843e", "ccfb4035", "5e1a07c1", "07-tuning-read", "7838bead", "07-explorer-read", "07-test-read", "a6d12821", "07-ptb-papers-read",
           "f21a9998", "2d74acbc"),
    "08": ("8b7a2346", "08-decay-read", "ec194833", "0ddf8d95", "44a81cee", "d2c3f745", "bb44924d", "f17146d2", "0afcfd50", "07fe00b6", "4b5f33b1",
           "7d81f07b", "c7ae9622"),
    "09": ("09-rungs-table", "03c39d8f", "09a1c0e2", "132ed614", "09a1c0f1", "09a1c0e7", "09a1c0e9", "09-ptb-steps-papers",
           "09a1c0ec"),
                         # what each rung adds, the ladder's table and drawing, the measurements' table, the mixture's
                         # split, the PTB figure and table, the take-away
    "10": ("10a1c0e0", "10-transformer-line", "10a1c0e4", "04b06b7b", "4283d270", "10-by-distance"),
                         # the attention block (diagram) and the heads, the equal-time budget and its curves, what the
                         # lesson measured, the by-distance table (off the path)
}


def hidden(lesson: str, cell_ids: Sequence[str]) -> set[str]:
    """The cells of ``lesson`` declared in :data:`HIDDEN`; a declared id the notebook lacks is a KeyError."""
    chosen = set(HIDDEN.get(lesson, ()))
    missing = sorted(chosen - set(cell_ids))
    if missing:
        raise KeyError(f"Lesson {lesson}'s hidden inputs name cells it no longer has ({', '.join(missing)}): "
                       "update HIDDEN in lmcourse/authoring/slides.py to the notebook's current cell ids.")
    return chosen


def declared(lesson: str, cell_ids: Sequence[str]) -> dict[str, str]:
    """``{cell id: slide type}`` for every cell of a lesson: its demo path as declared, the rest ``skip``."""
    if lesson not in DEMO:
        raise KeyError(f"Lesson {lesson} has no demo path: declare one in lmcourse/authoring/slides.py (DEMO).")
    path = dict(DEMO[lesson])
    missing = [c for c in path if c not in cell_ids]
    if missing:
        raise KeyError(f"Lesson {lesson}'s demo path names cells it no longer has ({', '.join(missing)}): "
                       "update DEMO in lmcourse/authoring/slides.py to the notebook's current cell ids.")
    return {c: path.get(c, SKIP) for c in cell_ids}


def stamp(nb: dict, lesson: str) -> int:
    """Write the declared ``slideshow.slide_type`` onto every cell of ``nb`` (a notebook as a dict), and the
    hidden-input flag onto the cells of :data:`HIDDEN` (and off every other); returns how many cells changed.
    Stamping twice changes nothing the second time."""
    ids = [c["id"] for c in nb["cells"]]
    types, hide = declared(lesson, ids), hidden(lesson, ids)
    changed = 0
    for cell in nb["cells"]:
        show = cell["metadata"].setdefault("slideshow", {})
        moved = show.get("slide_type") != types[cell["id"]]
        if moved:
            show["slide_type"] = types[cell["id"]]
        changed += moved | hide_input(cell, cell["id"] in hide)
    return changed


def stamp_lesson(nb: dict, path: Path) -> Optional[str]:
    """Stamp a course lesson (a notebook in ``notebooks/``) before ``make lessons`` saves it; None when done
    or when ``path`` is no course lesson, else the sentence saying why not (the outputs are saved anyway)."""
    if Path(path).resolve().parent != NOTEBOOKS.resolve():
        return None
    try:
        stamp(nb, lesson_id(path))
    except KeyError as err:
        return f"slides not stamped: {err.args[0]}"
    return None


def differences(nb: dict, lesson: str) -> list[str]:
    """One line per cell whose stamp is not the declared one (empty: the notebook is as declared)."""
    ids = [c["id"] for c in nb["cells"]]
    types, hide = declared(lesson, ids), hidden(lesson, ids)
    lines = [f"cell {c['id']}: {c['metadata'].get('slideshow', {}).get('slide_type')!r}, declared {types[c['id']]!r}"
             for c in nb["cells"] if c["metadata"].get("slideshow", {}).get("slide_type") != types[c["id"]]]
    return lines + [f"cell {c['id']}: input {'hidden' if input_hidden(c) else 'shown'}, declared "
                    f"{'hidden' if c['id'] in hide else 'shown'}"
                    for c in nb["cells"] if input_hidden(c) != (c["id"] in hide)]


def _write(nb: dict, path: Path) -> None:
    """Atomically, in nbformat's layout (indent 1, keys sorted, UTF-8, a final newline)."""
    atomic_write(path, json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def stamp_file(path: Path) -> int:
    """Stamp the notebook at ``path`` in place (written only when a stamp changed); cells changed."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = stamp(nb, lesson_id(path))
    if changed:
        check_writable([path], "stamps the lessons' slide types")
        _write(nb, path)
    return changed


def _waits_s(cell: dict) -> float:
    """Seconds the cell's stored outputs say it took: the longer of its progress bars' total (``[mm:ss<``)
    and the times it printed (``... in 3.7 s``, which may include the bars); 0 when it shows neither."""
    text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))
    bars = sum(int(m) * 60 + int(s) for m, s in re.findall(r"\[(\d+):(\d\d)<", text))
    return float(max(bars, sum(float(t) for t in re.findall(r"\bin (\d+(?:\.\d+)?) s\b", text))))


def demo_length(nb: dict, lesson: str) -> dict:
    """The demo path's length: ``slides`` (key presses to a new slide), ``fragments``, ``live`` code
    cells, ``wait_s`` (their longest stored wait) and ``minutes`` (talk plus waits)."""
    path = dict(DEMO[lesson])
    cells = [c for c in nb["cells"] if c["id"] in path]
    kinds = [path[c["id"]] for c in cells]
    waits = [_waits_s(c) for c in cells if c["cell_type"] == "code"]
    seconds = sum(SPEAKING_S.get(k, 0) for k in kinds) + sum(waits)
    return {"slides": sum(k in (SLIDE, SUB) for k in kinds), "fragments": kinds.count(FRAGMENT),
            "live": len(waits), "wait_s": max(waits, default=0.0), "minutes": round(seconds / 60, 1)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    _ctrl_c_raises()
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.slides", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("stamp", "check", "summary"))
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    args = parser.parse_args(argv)
    try:
        paths = lessons(args.lessons)
        status = 0
        for path in paths:
            if args.command == "stamp":
                print(f"{path.name:<36} {stamp_file(path):3d} cells stamped")
                continue
            nb = json.loads(path.read_text(encoding="utf-8"))
            if args.command == "check":
                for line in differences(nb, lesson_id(path)):
                    print(f"{path.name}: {line}")
                    status = 1
            else:
                n = demo_length(nb, lesson_id(path))
                print(f"{path.name:<36} {n['slides']:2d} slides, {n['fragments']:2d} fragments, {n['live']:2d} live "
                      f"cells (longest stored wait {n['wait_s']:.0f} s): about {n['minutes']:.0f} min")
    except (KeyError, ValueError, FileNotFoundError) as err:
        print(f"error: {err.args[0] if err.args else err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nerror: interrupted; each lesson is stamped whole or not at all.", file=sys.stderr)
        return EXIT_INTERRUPTED
    if status:
        print("run: python -m lmcourse.authoring.slides stamp", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
