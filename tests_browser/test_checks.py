"""The browser checks can fail: small notebooks, each cell broken in one known way, must be caught.

First on outputs as the page reports them (no browser needed), then end to end: notebooks written
into the lab's temporary folder run in Chromium exactly like the lessons, and the problems found
must be the planted ones, in the planted cells, and nothing else.
"""
import json

import pytest

import student

STDERR, STDOUT, PLAIN = student.STDERR, "application/vnd.jupyter.stdout", "text/plain"
ZERO_DIVISION = ("---------------------------------------------------------------------------\n"
                 "ZeroDivisionError                         Traceback (most recent call last)\n"
                 "Cell In[20], line 1\n----> 1 1/0\n\nZeroDivisionError: division by zero")
SYNTAX = "  Cell In[3], line 1\n    x = (\n        ^\nSyntaxError: incomplete input"


def out(mime, text, rendered=True):
    return {"mime": mime, "text": text, "nested": False, "rendered": rendered}


@pytest.mark.parametrize("output, expected", [
    (out(STDERR, ZERO_DIVISION), "error output: ZeroDivisionError: division by zero"),
    (out(STDERR, SYNTAX), "error output: SyntaxError: incomplete input"),
    (out(STDERR, "/tmp/x.py:3: UserWarning: careful\n  warnings.warn('careful')"), None),
    (out(STDERR, "a progress message on stderr"), None),
    (out(STDERR, "TqdmWarning: IProgress not found. Please update jupyter and ipywidgets."), "IProgress not found"),
    (out(PLAIN, "<Figure size 640x480 with 1 Axes>"), "figure shown as text"),
    (out(STDOUT, "the figure has 3 axes"), None),
    (out(PLAIN, "interactive(children=(FloatSlider(value=0.5),))"), "widget shown as raw text"),
    (out(PLAIN, "VBox(children=(FloatSlider(value=0.7, description='temperature'), Output()))"), "raw text"),
    (out(PLAIN, "an Output() of 3 numbers"), None),
    (out("widget", "Error displaying widget: model not found", rendered=False), "did not render"),
    (out("widget", "Loading widget...", rendered=False), "did not render"),
    (out("widget", "temperature 0.70", rendered=True), None),
    (out("widget", "", rendered=False), None),             # closed on purpose: tqdm(leave=False) when done
])
def test_output_checks(output, expected):
    found = student.output_problems(output)
    if expected is None:
        assert found == [], f"a sound output was flagged: {found}"
    else:
        assert len(found) == 1 and expected in found[0], f"expected one problem with {expected!r}, got {found}"


def test_image_and_run_checks():
    cell = {"index": 0, "prompt": "[1]:", "outputs": [], "imgs": [
        {"complete": True, "width": 640, "height": 480}, {"complete": True, "width": 0, "height": 0}]}
    assert [p[:13] for p in student.cell_problems(cell)] == ["an image (fig"]
    assert student.never_ran([{"index": 2, "prompt": "[3]:"}, {"index": 4, "prompt": "[ ]:"},
                              {"index": 5, "prompt": "[*]:"}]) == [4, 5]
    # a hidden input shows no prompt: it ran if it shows an output, or if a later cell ran (Run All goes in order)
    quiet = dict(prompt="", outputs=[], imgs=[])
    cells = [{"index": 0, "prompt": "[1]:"}, dict(quiet, index=1), {"index": 2, "prompt": "[2]:"}, dict(quiet, index=3)]
    assert student.never_ran(cells, hidden={1, 3}) == [3]          # the last one: nothing after it says it ran
    assert student.never_ran(cells, hidden={3}) == [1, 3]          # a cell whose input shows needs its own count


# ---------------------------------------------------------------------------- end to end, in Chromium
SLIDER = ("import ipywidgets as w\n"
          "k = w.IntSlider(value=3, min=0, max=10, description='k'); o = w.Output()\n"
          "def show(change=None):\n    o.clear_output()\n    with o:\n        print('k squared is', k.value ** 2)\n"
          "k.observe(show, names='value'); show(); display(w.VBox([k, o]))")
SOUND = [
    "import sys, warnings\nprint('a note on stderr', file=sys.stderr); warnings.warn('careful')",
    "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]); plt.show()",
    "from tqdm.auto import tqdm\nsum(i for i in tqdm(range(1000))) + sum(tqdm(range(9), leave=False))",
    SLIDER,
]
BROKEN = {   # cell source -> the problem it must raise
    "import ipywidgets as w\nw.IntSlider(value=1, min=0, max=5, description='inert')": "changed no output",
    "display({'text/plain': 'interactive(children=(FloatSlider(value=0.5),))'}, raw=True)": "raw text",
    "display({'application/vnd.jupyter.widget-view+json': {'version_major': 2, 'version_minor': 0, "
    "'model_id': 'no-such-model'}, 'text/plain': 'VBox()'}, raw=True)": "did not render",
    "display({'image/png': 'iVBORw0KGgoAAAAbroken'}, raw=True)": "could not draw",
    "import matplotlib.pyplot as plt\nfig = plt.figure(); fig": "figure shown as text",
    "1 / 0": "ZeroDivisionError",
}


def write_notebook(path, sources):
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": s} for i, s in enumerate(sources)]
    meta = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    path.write_text(json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}))
    return path


def visit(page, lab, name, sources, slider_timeout=120.0):
    nb = write_notebook(lab.root / name, sources)
    return student.Student(page, lab, nb, timeout=120, slider_timeout=slider_timeout).run()


def test_a_sound_notebook_passes(page, lab):
    v = visit(page, lab, "zz_sound.ipynb", SOUND)
    assert v.problems == [], "\n".join(v.problems)
    assert (v.code_cells, v.images) == (4, 1) and v.widgets >= 2 and len(v.sliders) == 1, v.summary()


def test_broken_cells_are_caught(page, lab):
    """Without a slider check failing first: sliders are only moved once the outputs are clean."""
    sources = [s for s in BROKEN if "inert" not in s] + ["print('after the error')"]
    v = visit(page, lab, "zz_broken.ipynb", sources)
    for i, (source, expected) in enumerate((s, BROKEN[s]) for s in sources[:-1]):
        hits = [p for p in v.problems if f"cell {i + 1} of" in p]
        assert len(hits) == 1 and expected in hits[0], f"cell {i + 1} `{source[:40]}`: {hits or v.problems}"
    assert f"cell {len(sources)} of {len(sources)}" in v.problems[-1] and "never ran" in v.problems[-1]
    assert len(v.problems) == len(sources), "\n".join(v.problems)


def test_a_slider_that_changes_nothing_is_caught(page, lab):
    inert = next(s for s in BROKEN if "inert" in s)
    v = visit(page, lab, "zz_inert.ipynb", [SLIDER, inert], slider_timeout=5)
    assert len(v.problems) == 1 and "'inert'" in v.problems[0] and "changed no output" in v.problems[0], v.problems
    assert len(v.sliders) == 1 and "'k' 3->4 (keyboard)" in v.sliders[0], v.sliders


def test_figures_that_never_appear_are_caught(page, lab):
    """Under a backend other than the inline one, plt.show() draws nothing and says nothing."""
    v = visit(page, lab, "zz_agg.ipynb", ["import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
                                          "plt.plot([1, 2]); plt.show()"])
    assert len(v.problems) == 1 and "shows no image" in v.problems[0], v.problems


@pytest.mark.parametrize("text, stuck", [
    ("fitting:   0%|          | 0/10 [00:00<?, ?it/s]", True),      # a tqdm widget's text copy
    ("cut:  40%4/10 [00:01<00:02]", True),                            # the course's HTML bar, as the page reads it
    ("model pass:  40%32.0k/80.0k [00:01<00:02]", True),
    ("fitting: 100%10/10 [00:03<00:00]", False),
    ("5% of the tokens are names", False),
    ("chance: 16%", False),                                           # shares that end a table's line
    ("function words\t29,531\t36.9%\t13.4\t13.4\t12.3\t-0.004\t-6%", False),
    ("KN 5-gram: d=1 91%  d=3 68%  d=9+ 64%", False),
])
def test_a_bar_below_100_percent_is_recognised(text, stuck):
    m = student.STUCK_BAR.search(text)
    assert (m is not None and int(m.group(1)) < 100) == stuck
