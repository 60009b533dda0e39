"""A student's path through one lesson in JupyterLab: open it, clear it, run all, look, move the sliders.

What counts as a problem (each reported as one line naming the lesson and the cell):

- a code cell that never ran (no execution count once the kernel is idle), or a kernel dialog;
- an error output, or a traceback written to stderr (warnings on stderr are fine);
- an image output the browser could not draw (not loaded, or ``naturalWidth == 0``), a matplotlib
  figure shown as its text, ``<Figure size 640x480 with 1 Axes>``, instead of a picture, and a
  lesson whose code plots but whose page shows no image (a backend that is not the inline one);
- a widget that does not render as one: "Error displaying widget", still "Loading widget...", a
  widget's repr as raw text (``interactive(...``, ``FloatSlider(...``), or tqdm's "IProgress not found";
- a slider that moves neither with the arrow key nor by dragging, or whose move changes no output;
- in a lesson saved by ``make lessons`` (stamped), what the page shows on opening, before anything
  runs: a widget's raw text, or a progress bar stopped below 100%.
"""
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

JS = (Path(__file__).with_name("page.js")).read_text()
LOG: list[str] = []          # one summary line per lesson, printed at the end of the session

STDERR = "application/vnd.jupyter.stderr"
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^(\w+\.)*\w*(Error|Exception|Interrupt|Exit)(:.*)?$",
                       re.M)
FIGURE_AS_TEXT = re.compile(r"^<Figure size [\d.]+x[\d.]+ with \d+ Axes>$", re.M)
WIDGET_AS_TEXT = re.compile(r"^\s*(interactive|[A-Z]\w*(Slider|Box|Dropdown|Buttons?|Output|Checkbox|Text|Textarea|"
                            r"Combobox|Select|Progress|Tab|Accordion|Label|HTML|Image|Picker|Play))\(", re.M)
# tqdm's "40%|", or an HTML bar's "40%" followed by its counts "4/10" (its track has no text); a share
# that ends a line of a table ("chance: 16%") is not a bar
STUCK_BAR = re.compile(r"(?<![\d.])(\d{1,3})%\s*(\||\d[\d.,]*[kMG]?/)")
MAX_SLIDERS = 6              # sliders moved per lesson, in page order
TIMEOUT = float(os.environ.get("LMCOURSE_BROWSER_TIMEOUT", "300"))   # seconds for one Run All


def _line(text: str, pattern: re.Pattern) -> str:
    hits = [m.group(0) for m in pattern.finditer(text) if m.group(0) != "Traceback (most recent call last)"]
    return (hits[-1] if hits else text.strip().splitlines()[-1] if text.strip() else "").strip()[:200]


def output_problems(out: dict) -> list[str]:
    """What is wrong with one output as the page shows it: ``{mime, text, nested, rendered}``."""
    text, mime, found = out["text"], out["mime"], []
    if mime == STDERR and TRACEBACK.search(text):
        found.append(f"error output: {_line(text, TRACEBACK)}")
    if mime == STDERR and "IProgress not found" in text:
        found.append("tqdm could not draw its progress bar as a widget (IProgress not found)")
    if mime != STDERR and FIGURE_AS_TEXT.search(text):
        found.append(f"a matplotlib figure shown as text, not drawn: {_line(text, FIGURE_AS_TEXT)}")
    if mime in ("text/plain", "application/vnd.jupyter.stdout") and WIDGET_AS_TEXT.search(text):
        found.append(f"a widget shown as raw text, not rendered: {_line(text, WIDGET_AS_TEXT)[:80]}")
    # An empty, unrendered area is a widget closed on purpose (a finished tqdm bar with leave=False).
    if mime == "widget" and ("Error displaying widget" in text or not out["rendered"] and text.strip()):
        found.append(f"a widget that did not render: {text.strip()[:120]}")
    return found


def cell_problems(cell: dict) -> list[str]:
    """Every problem in one code cell's outputs and images (see the module docstring)."""
    found = [p for out in cell["outputs"] for p in output_problems(out)]
    for img in cell["imgs"]:
        if not img["complete"] or img["width"] == 0 or img["height"] == 0:
            found.append("an image (figure) output that the browser could not draw (naturalWidth 0)")
    return list(dict.fromkeys(found))          # a figure shown twice is one problem


def never_ran(cells: list[dict], hidden=frozenset()) -> list[int]:
    """Indices of code cells with no execution count. A cell whose input is hidden (``hidden``: the course's
    rendered cells and drawings) shows no prompt in JupyterLab: it ran when its outputs are there, or when a later
    cell has a count (Run All runs the cells in order and stops at the first error), as a hidden cell that prints
    nothing does (a real-text section skipped without its corpus)."""
    counted = [c["index"] for c in cells if re.search(r"\d", c["prompt"])]
    last = max(counted, default=-1)
    return [c["index"] for c in cells if not re.search(r"\d", c["prompt"])
            and not (c["index"] in hidden and (c.get("outputs") or c.get("imgs") or c["index"] < last))]


@dataclass
class Visit:
    """What one lesson did in the browser."""
    lesson: str
    seconds: float = 0.0
    code_cells: int = 0
    images: int = 0
    widgets: int = 0
    sliders: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    redrawn: list[dict] = field(default_factory=list)    # output slots whose picture changed while running

    def summary(self) -> str:
        moved = "; ".join(self.sliders) if self.sliders else "no slider"
        status = f"{len(self.problems)} problem(s)" if self.problems else "ok"
        return (f"{self.lesson}: {status}, {self.code_cells} code cells in {self.seconds:.1f} s, "
                f"{self.images} images drawn, {self.widgets} widgets; {moved}")


class Student:
    """Drives one Playwright page through one lesson served by a :class:`labserver.LabServer`."""

    def __init__(self, page, lab, notebook: Path, timeout: float = 300.0, slider_timeout: float = 120.0):
        self.page, self.lab, self.notebook = page, lab, Path(notebook)
        self.timeout, self.slider_timeout = timeout, slider_timeout
        self.relpath = self.notebook.relative_to(lab.root).as_posix()
        nb = json.loads(self.notebook.read_text())
        cells = nb["cells"]
        self.stamped = "lmcourse" in nb.get("metadata", {})
        self.sources = ["".join(c["source"]) for c in cells]
        self.code = [src for src, c in zip(self.sources, cells) if c["cell_type"] == "code"]
        self.hidden = {i for i, c in enumerate(cells) if c.get("metadata", {}).get("jupyter", {}).get("source_hidden")}
        self.visit = Visit(self.notebook.stem)

    # ------------------------------------------------------------------ naming cells in messages
    def where(self, index: int, prompt: str = "") -> str:
        first = next((ln.strip() for ln in self.sources[index].splitlines() if ln.strip()), "") \
            if index < len(self.sources) else ""
        count = f" {prompt.strip()}" if prompt.strip() else ""
        return f"{self.visit.lesson}, cell {index + 1} of {len(self.sources)}{count} `{first[:60]}`"

    def js(self, call: str):
        return self.page.evaluate(f"window.__lesson.{call}")

    # ------------------------------------------------------------------ the path
    def run(self) -> Visit:
        start = time.monotonic()
        self.open()
        if self.stamped:
            self.visit.problems += self.stored_problems()
        self.menu("Edit", "editmenu:clear-all")
        self.menu("Run", "runmenu:run-all")
        if self.wait_for_run():
            self.visit.redrawn = [h for h in self.js("imageHistory()") if h["distinct"] >= 2]
            cells = self.look()
            if not self.visit.problems:
                self.move_sliders()
                self.visit.problems += [f"{self.where(c['index'], c['prompt'])}: after the slider moves, {p}"
                                        for c in self.js("report()") for p in cell_problems(c)]
            self.visit.code_cells = len(cells)
        self.visit.seconds = time.monotonic() - start
        return self.visit

    def open(self) -> None:
        self.page.add_init_script("window.__lesson = " + JS + ";\nwindow.__lesson.watch();")
        self.page.goto(self.lab.lesson_url(self.relpath))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state = self.js("state()")
            if state["found"] and state["status"] == "idle" and self.lab.kernel_connected(self.relpath):
                return
            if state["dialog"]:
                raise AssertionError(f"{self.visit.lesson}: JupyterLab showed a dialog on opening: {state['dialog']}")
            time.sleep(0.5)
        raise AssertionError(f"{self.visit.lesson}: the notebook did not open with an idle kernel within 120 s "
                             f"(kernel status {state['status']!r}).")

    def stored_problems(self) -> list[str]:
        """What the lesson shows as opened, before it runs: raw widget text or a bar below 100%."""
        found = []
        for c in self.js("report()"):
            for out in c["outputs"]:
                text = out["text"]
                if out["mime"] != "widget" and WIDGET_AS_TEXT.search(text):
                    found.append(f"{self.where(c['index'])}: on opening, a widget shown as raw text: "
                                 f"{_line(text, WIDGET_AS_TEXT)[:80]}")
                bars = [ln.rsplit("\r", 1)[-1] for ln in text.split("\n")]
                low = [b for b in bars if (m := STUCK_BAR.search(b)) and int(m.group(1)) < 100]
                if low:
                    found.append(f"{self.where(c['index'])}: on opening, a progress bar below 100%: {low[0].strip()[:80]}")
        return found

    def menu(self, name: str, command: str) -> None:
        """Clicks menu ``name`` then its item for ``command`` (what a student does with the mouse)."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(f"^{name}$")).click()
        self.page.locator(f".lm-Menu-item[data-command='{command}']").click()

    def wait_for_run(self) -> bool:
        """Waits for Run All to finish; records a problem and returns False when it does not."""
        deadline, started, settled = time.monotonic() + self.timeout, False, 0
        while time.monotonic() < deadline:
            state = self.js("state()")
            if state["dialog"]:
                self.visit.problems.append(f"{self.visit.lesson}: JupyterLab showed a dialog while running: "
                                           f"{state['dialog']}")
                return False
            prompts = [p["prompt"] for p in state["prompts"]]
            started = started or any(re.search(r"[\d*]", p) for p in prompts) or not prompts
            busy = any("*" in p for p in prompts) or state["status"] != "idle"
            settled = settled + 1 if started and not busy else 0
            if settled >= 2:
                break
            time.sleep(0.5)
        else:
            running = [p for p in state["prompts"] if "*" in p["prompt"]]
            where = self.where(running[0]["index"], "[*]") if running else self.visit.lesson
            self.visit.problems.append(f"{where}: still running after {self.timeout:.0f} s "
                                       f"(kernel {state['status']!r}).")
            return False
        for _ in range(40):                              # widgets render after the kernel goes idle
            if self.js("state()")["loadingWidgets"] == 0:
                break
            time.sleep(0.5)
        return True

    def look(self) -> list[dict]:
        """Checks every output; returns the code cells as the page reports them."""
        cells = self.js("report()")
        for c in cells:
            self.visit.problems += [f"{self.where(c['index'], c['prompt'])}: {p}" for p in cell_problems(c)]
            self.visit.images += sum(1 for img in c["imgs"] if img["width"] > 0)
            self.visit.widgets += sum(1 for o in c["outputs"] if o["mime"] == "widget" and not o["nested"])
        plots = any(re.search(r"\bplt\.|matplotlib", src) for src in self.code)
        if plots and self.visit.images == 0 and not self.visit.problems:
            self.visit.problems.append(f"{self.visit.lesson}: the code uses matplotlib but the page shows no image.")
        unrun = never_ran(cells, self.hidden)
        if unrun:
            why = " (Run All stops at the first error)" if self.visit.problems else ""
            self.visit.problems.append(f"{self.where(unrun[0])}: never ran, with {len(unrun)} code cell(s) "
                                       f"in all left without an execution count{why}.")
        return cells

    def move_sliders(self) -> None:
        """Moves each slider one step (arrow key, else a drag) and waits for some output to change."""
        for k, s in enumerate(self.js("sliders()")[:MAX_SLIDERS]):
            name = f"{self.where(s['cell'])}: slider {s['label'].strip() or k + 1!r}"
            before, moved, how = self.js("signature()"), s["value"], ""
            for how in ("keyboard", "mouse"):
                self.nudge(k, left=s["atMax"], how=how)
                for _ in range(8):
                    moved = self.js("sliders()")[k]["value"]
                    if moved != s["value"]:
                        break
                    time.sleep(0.25)
                if moved != s["value"]:
                    break
            if moved == s["value"]:
                self.visit.problems.append(f"{name} moved neither with the arrow key nor by dragging it.")
                continue
            t0, deadline = time.monotonic(), time.monotonic() + self.slider_timeout
            while time.monotonic() < deadline and self.js("signature()") == before:
                time.sleep(0.25)
            after = self.settled_signature()
            if after == before:
                self.visit.problems.append(f"{name}: moving it from {s['value']} to {moved} changed no output "
                                           f"within {self.slider_timeout:.0f} s.")
                continue
            self.visit.sliders.append(f"slider {s['label'].strip()!r} {s['value']}->{moved} ({how}), settled in "
                                      f"{time.monotonic() - t0:.1f} s")

    def nudge(self, k: int, left: bool, how: str) -> None:
        """One arrow key press on slider ``k``'s handle, or a 40-pixel drag of it."""
        handle = self.page.evaluate_handle(f"window.__lesson.sliderHandle({k})").as_element()
        if how == "keyboard":
            handle.focus()
            self.page.keyboard.press("ArrowLeft" if left else "ArrowRight")
            return
        handle.scroll_into_view_if_needed()
        box = handle.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        self.page.mouse.move(x, y)
        self.page.mouse.down()
        self.page.mouse.move(x - 40 if left else x + 40, y, steps=5)
        self.page.mouse.up()

    def settled_signature(self, timeout: float = 120.0) -> str:
        """The outputs' signature once the kernel is idle and nothing has changed for a second."""
        deadline, last, steady = time.monotonic() + timeout, None, 0
        while time.monotonic() < deadline and steady < 3:
            state, now = self.js("state()"), self.js("signature()")
            quiet = state["status"] == "idle" and state["loadingWidgets"] == 0
            steady = steady + 1 if quiet and now == last else 0
            last = now
            time.sleep(0.5)
        return last
