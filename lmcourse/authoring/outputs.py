"""What a saved lesson shows a reader without a kernel, checked.

A notebook opened on a static viewer (or untrusted in JupyterLab) shows each output's plain-text or
picture copy. Two things then read as broken:

- a widget's raw text, ``VBox(children=(HBox(children=(IntSlider(...`` or ``interactive(...``: the
  widget was displayed without a readable copy of itself (see :mod:`lmcourse.widgets.fallback`);
- a progress bar stopped below 100%, such as the "0%" a ``tqdm`` widget leaves in its text copy, or a
  bar that ended early (see :func:`lmcourse.progress.bar`);
- a folder of the machine that ran it (``/tmp/...``, ``/home/...``) or a calendar date: the saved lesson
  is the same for every reader, so it shows neither.

:func:`problems` lists them, one line each. Lessons executed by :mod:`lmcourse.authoring.lessons` carry
a stamp in their metadata (:data:`STAMP`), so a test can hold exactly those to the rule.
"""
from __future__ import annotations

import re
from typing import Iterable

STAMP = "lmcourse"  # notebook.metadata["lmcourse"] = {"executed_with": ..., "scale": ...}
MACHINERY = 1  # the version of the execution path that writes the stamp

WIDGET_REPR = re.compile(r"\b(VBox|HBox|GridBox|Box|Accordion|Tab)\(children=|\binteractive\(|"
                         r"\b([A-Z]\w*Slider|Dropdown|Combobox|Checkbox|ToggleButtons|Textarea|(Int|Float)Progress)\(")
PERCENT = re.compile(r"(?<![\d.])(\d{1,3})%\|")
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:tmp|home|root|work|Users|var/folders|private)/[^\s'\"]*")
DATE = re.compile(r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b")


def unfinished_bars(text: str) -> list[str]:
    """The progress-bar lines of ``text`` that stop below 100%, as a reader would see each last."""
    found = []
    for line in text.split("\n"):
        shown = line.rsplit("\r", 1)[-1]  # a text bar redraws itself after each carriage return
        m = PERCENT.search(shown)
        if m and int(m.group(1)) < 100:
            found.append(shown.strip())
    return found


def _texts(output: dict) -> Iterable[tuple[str, str]]:
    """(what, text) pairs a reader may see of one output: the stream, or the plain-text copy."""
    if output.get("output_type") == "stream":
        yield output.get("name", "stream"), _join(output.get("text", ""))
    data = output.get("data") or {}
    if "text/plain" in data:
        yield "text", _join(data["text/plain"])


def _join(text) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


def output_problems(output: dict) -> list[str]:
    """What is wrong with one stored output (a dict as in the notebook's JSON)."""
    found = []
    for what, text in _texts(output):
        m = WIDGET_REPR.search(text)
        if m:
            start = text.rfind("\n", 0, m.start()) + 1
            found.append(f"a widget's raw text ({what}): {text[start:start + 80].strip()}")
        for line in unfinished_bars(text):
            found.append(f"a progress bar stopped below 100% ({what}): {line[:100]}")
        for kind, pattern in (("a folder of this machine", MACHINE_PATH), ("a date", DATE)):
            m = pattern.search(text)
            if m:
                found.append(f"{kind} ({what}): {m.group(0)[:80]}")
    data = output.get("data", {})
    if _join(data.get("text/plain", "")).startswith("<Figure size") and not any(k.startswith("image/") for k in data):
        found.append("a figure shown as its text, not drawn: " + _join(data["text/plain"])[:60])
    return found


def problems(nb: dict) -> list[str]:
    """Every widget repr and unfinished progress bar in the stored outputs of ``nb`` (notebook JSON), and every
    cell that keeps the dates of a run (``metadata.execution``)."""
    found = []
    code = 0
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        code += 1
        if "execution" in cell.get("metadata", {}):
            found.append(f"cell {index + 1} (code cell {code}): keeps the dates of a run in metadata.execution")
        for output in cell.get("outputs", []):
            found += [f"cell {index + 1} (code cell {code}): {p}" for p in output_problems(output)]
    return found


def stamped(nb: dict) -> bool:
    """True when ``nb`` was executed and saved by this course's execution path (at any scale)."""
    stamp = (nb.get("metadata") or {}).get(STAMP) or {}
    return isinstance(stamp, dict) and stamp.get("executed_with", 0) >= MACHINERY
