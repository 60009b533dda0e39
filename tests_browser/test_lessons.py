"""Every lesson in notebooks/, run the way a student runs it: JupyterLab in Chromium, Run All at ci scale.

For each lesson: no error output or stderr traceback, every figure drawn, every widget rendered as
a widget, each slider (up to six) moves and changes what the outputs show, and the lesson file in
the lab's copy is not rewritten (autosave is off). Lessons are found by glob, so new ones are
tested as soon as they exist.

One lesson, :data:`LIVE_PLOT_LESSON`, runs with the live perplexity plot forced on (a first cell sets
``LMCOURSE_LIVE_PLOT=1`` in the lab's copy; ``ci`` scale keeps it off otherwise): its plot must
appear and be redrawn in place, so the page shows at least two pictures in turn in one output.
"""
import json
from pathlib import Path

import pytest

import student

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
LIVE_PLOT_LESSON = "05_softmax_bottleneck"  # the lesson that trains on screen with a LivePlot
FORCE_LIVE_PLOT = ("import os\n"
                   "os.environ['LMCOURSE_LIVE_PLOT'] = '1'   # the browser test: the live plot at ci scale too")


def force_live_plot(copy: Path) -> None:
    """Put a first cell into the lab's copy of a lesson that turns the live plot on."""
    nb = json.loads(copy.read_text())
    nb["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "force-live-plot", "metadata": {},
                           "outputs": [], "source": FORCE_LIVE_PLOT})
    copy.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("notebook", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_in_the_browser(page, lab, notebook):
    copy = lab.root / notebook.name
    live = notebook.stem == LIVE_PLOT_LESSON
    if live:
        force_live_plot(copy)
    before = copy.read_bytes()
    visit = student.Student(page, lab, copy, timeout=student.TIMEOUT).run()
    student.LOG.append(visit.summary())
    assert not visit.problems, f"{notebook.stem} in the browser:\n" + "\n".join(visit.problems)
    if live:
        sources = ["".join(c["source"]) for c in json.loads(copy.read_text())["cells"]]
        plots = [r for r in visit.redrawn if "LivePlot" in sources[r["cell"]]]
        assert plots, (f"{notebook.stem}: with LMCOURSE_LIVE_PLOT=1 no live plot was drawn and redrawn in place "
                       f"(outputs whose picture changed: {visit.redrawn})")
    assert copy.read_bytes() == before, (f"{notebook.stem}: JupyterLab rewrote the lesson during the run; "
                                         "autosave must be off in the test's settings.")
