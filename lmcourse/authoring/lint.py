r"""The mechanical checks of a lesson's presentation: what a reviewer would count by hand, counted.

Each check reads a notebook as saved (a dict, as :func:`json.load` gives it): its cells, their slide stamps
(``metadata.slideshow.slide_type``, see :mod:`lmcourse.authoring.slides`; a cell without one continues the
slide, as in nbconvert), their hidden-input flags (:mod:`lmcourse.course.rendered`) and their stored
outputs. The **path** is every cell not stamped ``skip`` (or ``notes``); a **slide** is a cell stamped
``slide`` or ``subslide`` with the path cells after it, up to the next slide.

=========================  =========================================================================
check                      finds
=========================  =========================================================================
``announces-skipped``      a slide that ends in prose and is followed by a skipped code cell showing a
                           result: the slide announces what the path does not show
``long-code``              a path code cell of more than :data:`MAX_CODE_LINES` visible lines (a hidden
                           input has none)
``title-words``            a title slide (the first slide) of more than :data:`MAX_TITLE_WORDS` words
``slide-words``            any other slide of more than :data:`MAX_SLIDE_WORDS` words (its Markdown and the
                           Markdown its rendered cells show): keep the point, move the rest to a skipped
                           cell, or to a ``notes`` cell, which the slide show gives the speaker
``shown-takeaway``         a take-away code cell whose input shows: on the take-away slide, rendering its
                           heading, or calling :func:`lmcourse.course.rendered.takeaway`
``shown-rendered``         any other path code cell that only renders Markdown (prose, a table) and
                           shows the Python that formats it
``untitled-slide``         a slide that does not open with a Markdown heading
``exercise-no-check``      an "Exercise" heading whose section has no ``check("...")`` call
``exercise-no-hint``       a check whose registered hint is empty
``hint-tells``             a hint that asks no question (a recipe rather than a question)
``exercise-no-solution``   an exercise section without a hidden solution (``<details>`` ... Solution)
``exercise-answer-shown``  a stored output of the section, before its solution, that shows a value the
                           exercise asks to predict (declared by its check: ``exercise(..., predicts=...)``)
=========================  =========================================================================

Text under 10 points cannot be read from a saved notebook (a figure is a picture by then): build figures
with :mod:`lmcourse.course.diagrams` or check them with :func:`lmcourse.course.diagrams.problems`.

:func:`words_per_sentence` gives the mean length of a lesson's sentences (the target is about 18 words at
most); :func:`check_notebook` runs every check on one notebook, :func:`check_lessons` on the lessons
(what ``tests/test_lint.py`` will assert once the lessons are edited), and ``python -m lmcourse.authoring.lint
[LESSON ...] [--findings]`` prints the table of counts per lesson (status 1 when a lesson has a finding).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..course import exercises as registry
from ..course.catalog import lesson_id, lessons
from ..course.rendered import input_hidden

__all__ = ["CHECKS", "MAX_CODE_LINES", "MAX_TITLE_WORDS", "MAX_SLIDE_WORDS", "MAX_SENTENCE_WORDS", "Finding", "slides",
           "announces_skipped", "long_code", "title_words", "slide_words", "shown_takeaways", "shown_rendered", "untitled_slides",
           "exercises", "exercise_findings", "prose", "words", "sentences", "words_per_sentence", "check_notebook",
           "summary", "check_lessons"]

MAX_CODE_LINES = 30  # a path code cell longer than this cannot be read from the back of a room
MAX_TITLE_WORDS = 100  # a title slide is read in the minute it is shown
MAX_SLIDE_WORDS = 120  # a body slide, too, is read in the minute or two it is shown, beside its figure
MAX_SENTENCE_WORDS = 18  # the target mean sentence length of a lesson's prose (a guide, not a check)

CHECKS = ("announces-skipped", "long-code", "title-words", "slide-words", "shown-takeaway", "shown-rendered", "untitled-slide",
          "exercise-no-check", "exercise-no-hint", "hint-tells", "exercise-no-solution", "exercise-answer-shown")
OFF_PATH = ("skip", "notes")
NEW_SLIDE = ("slide", "subslide")
CHECK_CALL = re.compile(r"""\bcheck\(\s*["'](\d\d[a-z]?\.[\w-]+)["']""")
EXERCISE_HEADING = re.compile(r"^#{1,6}\s*Exercise\b(?!s)", re.M | re.I)
ANY_HEADING = re.compile(r"^#{1,6}\s", re.M)
TAKEAWAY_HEADING = re.compile(r"^#{1,6}\s*(?:what to )?take[ -]?aways?\b", re.M | re.I)
SOLUTION = re.compile(r"<details\b.*?Solution", re.S | re.I)


@dataclass(frozen=True)
class Finding:
    check: str  # the check's name, as in the table above
    cell: int  # the cell's 0-based position in the notebook
    id: str  # the cell's id
    message: str  # one sentence: what is wrong and how to fix it

    def __str__(self) -> str:
        return f"c{self.cell} ({self.id}) {self.check}: {self.message}"


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _type(cell) -> str:
    return (cell.get("metadata", {}).get("slideshow") or {}).get("slide_type", "-")


def _on_path(cell) -> bool:
    return _type(cell) not in OFF_PATH


def _output_text(cell) -> str:
    """What a cell's stored outputs show as text (streams, plain text, Markdown, HTML without its tags)."""
    parts = []
    for output in cell.get("outputs", []):
        text = output.get("text")
        if text is not None:
            parts.append("".join(text) if isinstance(text, list) else text)
        data = output.get("data", {})
        for kind in ("text/markdown", "text/html", "text/plain"):
            if kind in data:
                value = data[kind]
                value = "".join(value) if isinstance(value, list) else value
                parts.append(re.sub(r"<[^>]+>", " ", value) if kind == "text/html" else value)
                break
    return "\n".join(parts)


def _shows_something(cell) -> bool:
    """True when a code cell's stored outputs show anything (text, a table, a picture)."""
    return cell.get("cell_type") == "code" and bool(cell.get("outputs"))


def slides(nb) -> list[list[int]]:
    """The slides of the path: each a list of cell positions, the first stamped ``slide`` or ``subslide``."""
    found: list[list[int]] = []
    for k, cell in enumerate(nb["cells"]):
        if not _on_path(cell):
            continue
        if _type(cell) in NEW_SLIDE or not found:
            found.append([k])
        else:
            found[-1].append(k)
    return found


def _finding(nb, k: int, check: str, message: str) -> Finding:
    assert check in CHECKS, check
    return Finding(check, k, nb["cells"][k].get("id", ""), message)


# ------------------------------------------------------------------------------------------ the path

def announces_skipped(nb) -> list[Finding]:
    """Prose on the path that announces a result the path skips: a path Markdown cell whose next cell is skipped
    and shows a result (a code cell with stored outputs), or a slide of prose alone (neither the first nor the
    last) whose skipped cells before the next slide show one."""
    found = []
    cells = nb["cells"]
    path = slides(nb)
    for n, slide in enumerate(path):
        for k in slide:
            after = k + 1
            if (cells[k]["cell_type"] == "markdown" and after < len(cells) and not _on_path(cells[after])
                    and _shows_something(cells[after])):
                found.append(_finding(nb, k, "announces-skipped", f"the result after this prose (cell {after}) is "
                                      "skipped: put that cell on the path, or end the slide on what it shows."))
        if 0 < n < len(path) - 1 and all(cells[k]["cell_type"] == "markdown" for k in slide):
            shown = [j for j in range(slide[-1] + 1, path[n + 1][0]) if _shows_something(cells[j])]
            if shown and not any(f.cell == slide[-1] for f in found):
                found.append(_finding(nb, slide[-1], "announces-skipped", f"a slide of prose alone, and the results "
                                      f"after it (cell {shown[0]}) are skipped: show one on the slide, or fold the "
                                      "slide into the next."))
    return found


def visible_lines(cell) -> int:
    """The lines of a cell's input that show (none when its input is hidden)."""
    if input_hidden(cell):
        return 0
    source = _source(cell).rstrip("\n")
    return len(source.splitlines()) if source else 0


def long_code(nb, limit: int = MAX_CODE_LINES) -> list[Finding]:
    """Path code cells of more than ``limit`` visible lines."""
    return [_finding(nb, k, "long-code", f"{visible_lines(c)} lines of code on a slide (at most {limit}): move "
                     "the setup to a skipped cell before it, or hide the input.")
            for k, c in enumerate(nb["cells"])
            if c["cell_type"] == "code" and _on_path(c) and visible_lines(c) > limit]


def _visible_text(markdown: str) -> str:
    """Markdown as read on a slide: math a word per formula, links their text, tags and markup gone."""
    text = re.sub(r"<!--.*?-->", " ", markdown, flags=re.S)
    text = re.sub(r"\$\$.*?\$\$", " formula ", text, flags=re.S)
    text = re.sub(r"\$[^$\n]+\$", " x ", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return text


def words(text: str) -> int:
    """The words of ``text``: runs of characters holding a letter or a digit."""
    return len([w for w in re.split(r"[\s|/]+", text) if re.search(r"\w", w)])


def title_words(nb) -> int:
    """The words on the title slide (the path's first slide): its Markdown, formulas counted as one word."""
    found = slides(nb)
    if not found:
        return 0
    return sum(words(_visible_text(_source(nb["cells"][k]))) for k in found[0]
               if nb["cells"][k]["cell_type"] == "markdown")


def _title_findings(nb, limit: int = MAX_TITLE_WORDS) -> list[Finding]:
    n = title_words(nb)
    if n <= limit:
        return []
    return [_finding(nb, slides(nb)[0][0], "title-words", f"the title slide holds {n} words (at most {limit}): keep "
                     "the claim, move the run times and the details to a skipped cell after it.")]


def slide_words(nb, slide: Sequence[int]) -> int:
    """The words a slide shows as prose: its Markdown cells and the Markdown its rendering cells show (a
    take-away, a table), formulas counted as one word; printed output and figures are not counted."""
    cells = nb["cells"]
    return sum(words(_visible_text(_source(cells[k]) if cells[k]["cell_type"] == "markdown" else _output_text(cells[k])))
               for k in slide if cells[k]["cell_type"] == "markdown" or _renders_markdown(cells[k]))


def _slide_findings(nb, limit: int = MAX_SLIDE_WORDS) -> list[Finding]:
    found = []
    for slide in slides(nb)[1:]:
        n = slide_words(nb, slide)
        if n > limit:
            found.append(_finding(nb, slide[0], "slide-words", f"the slide holds {n} words (at most {limit}): keep "
                                  "its point, move the rest to a skipped cell or a notes cell after it."))
    return found


def _heading(cell) -> Optional[str]:
    """The Markdown heading a cell opens with, or None."""
    if cell["cell_type"] != "markdown":
        return None
    first = next((line for line in _source(cell).splitlines() if line.strip()), "")
    return first.lstrip("#").strip() if re.match(r"#{1,6}\s", first) else None


def _renders_markdown(cell) -> bool:
    """True for a code cell whose stored outputs are all Markdown: it only renders prose (or a table)."""
    outputs = cell.get("outputs", [])
    return cell["cell_type"] == "code" and bool(outputs) and all("text/markdown" in o.get("data", {})
                                                                 for o in outputs)


def shown_takeaways(nb) -> list[Finding]:
    """Take-away code cells whose input shows: on a slide headed "take away", rendering such a heading, or
    calling ``takeaway(``."""
    found = []
    cells = nb["cells"]
    for slide in slides(nb):
        on_takeaway = bool(TAKEAWAY_HEADING.search(_source(cells[slide[0]])))
        for k in slide:
            cell = cells[k]
            if cell["cell_type"] != "code" or input_hidden(cell):
                continue
            if on_takeaway or re.search(r"\btakeaway\(", _source(cell)) or TAKEAWAY_HEADING.search(_output_text(cell)):
                found.append(_finding(nb, k, "shown-takeaway", "the take-away shows the Python that formats it: "
                                      "render it with lmcourse.course.rendered.takeaway and declare the cell in "
                                      "HIDDEN (lmcourse/authoring/slides.py)."))
    return found


def shown_rendered(nb) -> list[Finding]:
    """Path code cells that only render Markdown (prose, a table) and show the Python that formats it; the
    take-aways are :func:`shown_takeaways`'s."""
    takeaways = {f.cell for f in shown_takeaways(nb)}
    return [_finding(nb, k, "shown-rendered", "the cell only renders Markdown, and the slide shows the Python "
                     "that formats it: declare the cell in HIDDEN (lmcourse/authoring/slides.py).")
            for k, c in enumerate(nb["cells"])
            if _on_path(c) and _renders_markdown(c) and not input_hidden(c) and k not in takeaways]


def untitled_slides(nb) -> list[Finding]:
    """Slides that do not open with a Markdown heading."""
    return [_finding(nb, slide[0], "untitled-slide", "the slide opens without a heading: start it with a Markdown "
                     "cell whose first line is a heading (## ...).")
            for slide in slides(nb) if _heading(nb["cells"][slide[0]]) is None]


# ------------------------------------------------------------------------------------------ exercises

def _outside_code(markdown: str) -> str:
    """Markdown without its fenced code blocks (a ``# comment`` in a solution is no heading)."""
    return re.sub(r"```.*?```", " ", markdown, flags=re.S)


def exercises(nb) -> list[dict]:
    """The exercise sections: for each "Exercise" heading, the cells up to the next heading, with the check
    ids called there and the position of the hidden solution (None when there is none)."""
    cells = nb["cells"]

    def heads(cell, pattern):
        return cell["cell_type"] == "markdown" and pattern.search(_outside_code(_source(cell)))

    found = []
    for k in [k for k, c in enumerate(cells) if heads(c, EXERCISE_HEADING)]:
        end = k + 1
        while end < len(cells) and not heads(cells[end], ANY_HEADING):
            end += 1
        section = range(k, end)
        text = _outside_code(_source(cells[k]))
        title = text[EXERCISE_HEADING.search(text).start():].splitlines()[0].lstrip("#").strip()
        ids = [i for j in section if cells[j]["cell_type"] == "code" for i in CHECK_CALL.findall(_source(cells[j]))]
        solution = next((j for j in section if cells[j]["cell_type"] == "markdown"
                         and SOLUTION.search(_source(cells[j]))), None)
        found.append({"heading": k, "title": title, "cells": list(section), "checks": list(dict.fromkeys(ids)),
                      "solution": solution})
    return found


_NUMBER = re.compile(r"(?<![\w.])[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?(?![\w])|(?<![\w.])[-−]?\d+(?:\.\d+)?%?(?![\w])")


def _numbers(text: str) -> list[tuple[float, float]]:
    """Every number printed in ``text`` as (value, half a unit of its last digit); a percentage divided by 100."""
    found = []
    for token in _NUMBER.findall(text):
        percent = token.endswith("%")
        digits = token.rstrip("%").replace(",", "").replace("−", "-")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        value, half = float(digits), 0.5 * 10 ** -decimals
        if percent:
            value, half = value / 100, half / 100
        found.append((value, half))
    return found


def _shown(value, text: str, relative: float = 0.05) -> Optional[str]:
    """How ``text`` shows ``value`` (None when it does not): a string as a substring, a whole number exactly,
    a fraction within ``relative`` of it or to the digits printed, a list or set as its numbers in order."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return value if value.strip() and value.strip().lower() in text.lower() else None
    if isinstance(value, dict):
        return next((hit for v in value.values() if (hit := _shown(v, text, relative))), None)
    if isinstance(value, (set, frozenset, list, tuple)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else list(value)
        if not items or not all(isinstance(v, (int, float)) for v in items):
            return None
        pattern = r"\s*,\s*".join(rf"(?<![\w.]){re.escape(f'{v:g}')}(?![\w])" for v in items)
        return f"[{', '.join(f'{v:g}' for v in items)}]" if re.search(pattern, text) else None
    if isinstance(value, int):
        return f"{value}" if any(x == value for x, _ in _numbers(text)) else None
    if isinstance(value, float):
        for x, half in _numbers(text):
            if abs(x - value) <= max(half, relative * abs(value)):
                return f"{x:g}"
    return None


def _exercise_text(cell) -> str:
    """A cell's stored outputs without the exercise ids they print (``Exercise 02.batches`` is no number)."""
    return re.sub(r"\b\d\d[a-z]?\.[\w-]+", " ", _output_text(cell))


def exercise_findings(nb) -> list[Finding]:
    """Each exercise's check, hint, solution, and the outputs stored before its solution (see the table above)."""

    found = []
    cells = nb["cells"]
    for ex in exercises(nb):
        k = ex["heading"]
        if not ex["checks"]:
            found.append(_finding(nb, k, "exercise-no-check", f"{ex['title']!r} has no check(\"...\") call: register "
                                  "a check in lmcourse/course/exercises/ and call it below the answer cell."))
        if ex["solution"] is None:
            found.append(_finding(nb, k, "exercise-no-solution", f"{ex['title']!r} has no hidden solution: add a "
                                  "Markdown cell <details><summary>Solution</summary> ... </details>."))
        for id in ex["checks"]:
            try:
                exercise = registry.get(id)
            except KeyError:
                found.append(_finding(nb, k, "exercise-no-check", f"{ex['title']!r} calls check({id!r}), which is "
                                      "registered nowhere: fix the id or register the check."))
                continue
            if not exercise.hint.strip():
                found.append(_finding(nb, k, "exercise-no-hint", f"the check {id} has no hint: give exercise(...) one."))
            elif "?" not in exercise.hint:
                found.append(_finding(nb, k, "hint-tells", f"the hint of {id} asks nothing (a recipe, not a question): "
                                      "turn it into the question that leads to the step."))
            before = [j for j in ex["cells"] if ex["solution"] is None or j < ex["solution"]]
            for value in registry.predicted(id):
                for j in before:
                    hit = _shown(value, _exercise_text(cells[j]))
                    if hit:
                        found.append(_finding(nb, j, "exercise-answer-shown", f"the stored output shows {hit}, the "
                                              f"value {id} asks to predict, before its solution: clear that output "
                                              "or move the cell after the solution."))
                        break
    return found


# ------------------------------------------------------------------------------------------ prose

def prose(nb, generated: bool = False) -> str:
    """A lesson's prose: its Markdown cells (and, with ``generated``, the Markdown its code cells print), less
    headings, tables, code, display formulas and the hidden solutions."""
    parts = [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    if generated:
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                value = output.get("data", {}).get("text/markdown")
                if value is not None:
                    parts.append("".join(value) if isinstance(value, list) else value)
    text = "\n\n".join(parts)
    text = re.sub(r"<details\b.*?</details>", " ", text, flags=re.S | re.I)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"^\s*(?:#{1,6}\s.*|\|.*)$", " ", text, flags=re.M)
    return _visible_text(text)


_ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|et al|cf|vs|Fig|Eq|Sec|approx|resp|etc)\.", re.I)


def sentences(text: str) -> list[str]:
    """The sentences of prose: split at a full stop, a question or exclamation mark followed by a capital (or
    the end), at paragraph breaks and at each list item; abbreviations (e.g., et al.) do not end one."""
    text = _ABBREVIATIONS.sub(lambda m: m.group(1).replace(".", ""), text)
    text = re.sub(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`", "", text)
    blocks = re.split(r"\n\s*\n|\n\s*(?:[-*+]|\d+\.)\s+", "\n" + text)
    found = []
    for block in blocks:
        block = re.sub(r"^\s*(?:[-*+]|\d+\.)\s+", "", block)
        for piece in re.split(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])", " ".join(block.split())):
            if words(piece):
                found.append(piece)
    return found


def words_per_sentence(nb, generated: bool = False) -> float:
    """The mean words per sentence of a lesson's prose (:func:`prose`); the course's target is at most
    :data:`MAX_SENTENCE_WORDS`. 0.0 for a lesson without prose."""
    found = sentences(prose(nb, generated))
    return sum(words(s) for s in found) / len(found) if found else 0.0


# ------------------------------------------------------------------------------------------ all of it

def check_notebook(nb) -> list[Finding]:
    """Every mechanical check on one notebook, in the order of the cells."""
    found = (announces_skipped(nb) + long_code(nb) + _title_findings(nb) + _slide_findings(nb) + shown_takeaways(nb) + shown_rendered(nb)
             + untitled_slides(nb) + exercise_findings(nb))
    return sorted(found, key=lambda f: (f.cell, f.check))


def summary(nb) -> dict:
    """The counts a lesson editor fixes, and the numbers a lesson is measured by."""
    found = check_notebook(nb)
    count = lambda name: sum(f.check == name for f in found)  # noqa: E731
    return {"slides": len(slides(nb)), "announces_skipped": count("announces-skipped"),
            "long_code": count("long-code"), "title_words": title_words(nb),
            "dense_slides": count("slide-words"),
            "shown_takeaways": count("shown-takeaway"), "shown_rendered": count("shown-rendered"),
            "untitled": count("untitled-slide"),
            "exercise_gaps": count("exercise-no-check") + count("exercise-no-solution") + count("exercise-no-hint"),
            "hints_telling": count("hint-tells"), "answers_shown": count("exercise-answer-shown"),
            "words_per_sentence": round(words_per_sentence(nb), 1),
            "with_generated": round(words_per_sentence(nb, generated=True), 1), "findings": found}


def check_lessons(paths: Iterable[Path] = ()) -> dict[str, list[Finding]]:
    """Every mechanical check on each lesson (all of ``notebooks/`` by default): ``{notebook name: findings}``.
    The lessons pass when every list is empty."""
    return {Path(p).name: check_notebook(json.loads(Path(p).read_text(encoding="utf-8")))
            for p in (list(paths) or lessons())}


COLUMNS = (("lesson", "lesson"), ("slides", "slides"), ("announces_skipped", "announce skipped"),
           ("long_code", "code > 30 lines"), ("title_words", "title words"), ("dense_slides", "slides > 120 words"),("shown_takeaways", "take-away input"),
           ("shown_rendered", "rendered input"),
           ("untitled", "untitled"), ("exercise_gaps", "exercise gaps"), ("hints_telling", "hints telling"),
           ("answers_shown", "answers shown"), ("words_per_sentence", "words/sentence"),
           ("with_generated", "with generated"))


def table(rows: Sequence[dict]) -> str:
    """The counts as a Markdown table, one row per lesson."""
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(row[key]) for key, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.authoring.lint", description=__doc__.split("\n\n")[0])
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    parser.add_argument("--findings", action="store_true", help="list each finding under the table")
    args = parser.parse_args(argv)
    try:
        paths = lessons(args.lessons)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    rows = []
    for path in paths:
        row = summary(json.loads(Path(path).read_text(encoding="utf-8")))
        rows.append({"lesson": lesson_id(path), **row})
    print(table(rows))
    if args.findings:
        for row in rows:
            for finding in row["findings"]:
                print(f"{row['lesson']:>3} {finding}")
    return int(any(row["findings"] for row in rows))


if __name__ == "__main__":
    sys.exit(main())
