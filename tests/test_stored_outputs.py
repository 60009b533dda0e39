"""What a saved lesson shows without a kernel: no widget's raw text, no progress bar stuck below 100%.

The checker is tried both ways on small notebooks written here, then on notebooks executed by a real
kernel through the course's execution path (the one ``make warm`` and ``make lessons`` use), then on
the committed lessons that path has stamped.
"""
import ast
import base64
import json
from pathlib import Path

import nbformat
import pytest

from lmcourse import progress
from lmcourse.authoring import lessons
from lmcourse.authoring.outputs import STAMP, output_problems, problems, stamped, unfinished_bars

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]*_*.ipynb"))


def notebook(*outputs, metadata=None) -> dict:
    """A one-cell notebook (as JSON) holding ``outputs``."""
    cell = {"cell_type": "code", "execution_count": 1, "id": "c0", "metadata": {}, "source": "x", "outputs": list(outputs)}
    return {"cells": [{"cell_type": "markdown", "id": "m0", "metadata": {}, "source": "# t"}, cell],
            "metadata": metadata or {}, "nbformat": 4, "nbformat_minor": 5}


def display(data: dict) -> dict:
    return {"output_type": "display_data", "data": data, "metadata": {}}


def stream(text: str, name="stderr") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


WIDGET = {"model_id": "abc", "version_major": 2, "version_minor": 0}
ZERO = "fitting:   0%|          | 0/10 [00:00<?, ?it/s]"
DONE = "fitting: 100%|██████████| 10/10 [00:03<00:00,  3.1it/s]"


# ------------------------------------------------------------------------------- the checker
@pytest.mark.parametrize("output, expected", [
    (display({"application/vnd.jupyter.widget-view+json": WIDGET,
              "text/plain": "VBox(children=(HBox(children=(IntSlider(value=16, description='d'),)),))"}), "raw text"),
    (display({"text/plain": "interactive(children=(FloatSlider(value=0.5),))"}), "raw text"),
    (display({"application/vnd.jupyter.widget-view+json": WIDGET, "text/plain": ZERO}), "below 100%"),
    (stream("epoch 1\n" + "\r".join(["  0%|", " 40%|████      | 4/10"]) + "\n"), "below 100%"),
    (stream("\r".join([ZERO, " 50%|█████     | 5/10", " 90%|█████████ | 9/10"])), "below 100%"),
    (display({"text/plain": DONE, "text/html": "<div>fitting 100%</div>"}), None),
    (stream("\r".join([ZERO, " 50%|█████     | 5/10", DONE]) + "\nepoch 1 | valid ppl 80.1\n"), None),
    (display({"application/vnd.jupyter.widget-view+json": WIDGET, "image/png": "iVBORw0KGgo=",
              "text/plain": "(the rank explorer's sliders move with a running kernel)"}), None),
    (display({"text/plain": "an Output() of 3 numbers; 5% of the tokens"}), None),
    (display({"text/plain": ""}), None),                                   # a bar removed on purpose
])
def test_the_checker_finds_raw_widgets_and_unfinished_bars(output, expected):
    found = output_problems(output)
    if expected is None:
        assert found == [], found
    else:
        assert len(found) == 1 and expected in found[0], found
        assert problems(notebook(output)) == [f"cell 2 (code cell 1): {found[0]}"]


def test_unfinished_bars_reads_what_a_reader_sees_last():
    assert unfinished_bars(f"{ZERO}\r{DONE}") == []
    assert unfinished_bars(f"{DONE}\n{ZERO}") == [ZERO]
    assert unfinished_bars("prices rose 5%|and fell") == ["prices rose 5%|and fell"]  # the bar's own mark only
    assert unfinished_bars("prices rose 5% | and fell") == []


def test_the_stamp_says_which_notebooks_the_rule_holds_for():
    assert not stamped(notebook()) and not stamped(notebook(metadata={STAMP: "yes"}))
    assert stamped(notebook(metadata={STAMP: {"executed_with": 1, "scale": "cpu"}}))


# ------------------------------------------------------------------------------- the bar
@pytest.fixture
def published(monkeypatch):
    """A notebook kernel imitated: what the bar shows and updates, by display id."""
    shown: dict = {}
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress, "_show", lambda bundle, display_id: shown.__setitem__(display_id, [bundle]))
    monkeypatch.setattr(progress, "_update", lambda bundle, display_id: shown[display_id].append(bundle))
    return shown


def test_a_notebook_bar_ends_in_its_final_state(published):
    for _ in progress.bar(range(7), desc="seven", enabled=True):
        pass
    (history,) = published.values()
    assert "  0%|" in history[0]["text/plain"]
    assert history[-1]["text/plain"].startswith("seven: 100%|") and "7/7" in history[-1]["text/plain"]
    assert "width: 100.0%" in history[-1]["text/html"] and "#2e8540" in history[-1]["text/html"]
    assert output_problems(display(history[-1])) == [] and output_problems(display(history[0]))


def test_a_bar_stopped_early_stays_visible_and_is_flagged(published):
    b = progress.bar(total=10, desc="cut", enabled=True)
    b.update(4)
    b.close()
    last = next(iter(published.values()))[-1]
    assert " 40%|" in last["text/plain"] and "#b42318" in last["text/html"]
    assert len(output_problems(display(last))) == 1


def test_leave_false_removes_the_bar_and_disabled_shows_nothing(published):
    with progress.bar(total=3, desc="gone", leave=False, enabled=True) as b:
        b.update(3)
    assert next(iter(published.values()))[-1] == {"text/plain": ""}
    published.clear()
    for _ in progress.bar(range(3), enabled=False):
        pass
    assert published == {}


def test_the_reused_trainer_bar_ends_at_its_last_epoch(published):
    b = progress.tqdm(total=5, unit="batch")
    for epoch in range(3):
        b.reset(total=5)
        b.update(5)
    b.close()
    assert next(iter(published.values()))[-1]["text/plain"].split("|")[0].endswith("100%")


def test_outside_a_notebook_the_bar_is_plain_text(capsys):
    for _ in progress.bar(range(3), desc="text", enabled=True):
        pass
    assert "text: 100%|" in capsys.readouterr().err


def test_live_plot_switch(monkeypatch):
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr(progress.config, "SCALE", "ci")
    monkeypatch.delenv("LMCOURSE_LIVE_PLOT", raising=False)
    assert not progress.live_plot_enabled(None)
    monkeypatch.setenv("LMCOURSE_LIVE_PLOT", "1")
    assert progress.live_plot_enabled(None) and not progress.live_plot_enabled(False)
    monkeypatch.setenv("LMCOURSE_LIVE_PLOT", "0")
    monkeypatch.setattr(progress.config, "SCALE", "cpu")
    assert not progress.live_plot_enabled(None)
    monkeypatch.setenv("LMCOURSE_LIVE_PLOT", "sometimes")
    with pytest.raises(ValueError, match="LMCOURSE_LIVE_PLOT='sometimes' is not a switch"):
        progress.live_plot_enabled(None)
    monkeypatch.setattr(progress, "in_notebook", lambda: False)
    assert not progress.live_plot_enabled(True)


# ------------------------------------------------------------------------------- a real kernel
CELLS = [
    "from lmcourse.progress import bar, tqdm\nimport time\nfor i in tqdm(range(4), desc='four'):\n    time.sleep(0.05)",
    "b = bar(total=3, desc='scratch', leave=False, enabled=True)\nb.update(3); b.close()",
    "import ipywidgets as w\nimport matplotlib\nmatplotlib.use('agg')\nfrom matplotlib.figure import Figure\n"
    "from lmcourse.widgets.fallback import WithFallback\nfig = Figure(figsize=(2, 2)); fig.add_subplot().plot([1, 3, 2])\n"
    "WithFallback(w.VBox([w.IntSlider(value=3, description='k'), w.Output()]), figure=fig)",
    "import torch\nfrom lmcourse.course.cmp import cmp\ncmp('twice', torch.ones(3) * 2, torch.full((3,), 2.0));",
]
OLD_WAY = "from tqdm.auto import tqdm as old\nfor i in old(range(4), desc='widget bar'):\n    pass"


def write(path: Path, sources: list) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def test_a_kernel_run_stores_finished_bars_and_readable_widgets(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    good = write(tmp_path / "01_good.ipynb", CELLS)
    old = write(tmp_path / "02_old.ipynb", [OLD_WAY])
    with pytest.raises(lessons.NotebookError, match=r"^02_old.ipynb was saved with outputs that .* refuses"):
        lessons.warm([good, old], scale="ci", store_outputs=True)  # both saved, then the refused one named
    times = lessons.measured_times()
    assert set(times) == {"ci/01_good.ipynb", "ci/02_old.ipynb"} and all(s > 0 for s in times.values())
    nb = json.loads(good.read_text())
    assert nb["metadata"]["kernelspec"] == lessons.KERNELSPEC and stamped(nb)
    assert nb["metadata"][STAMP]["scale"] == "ci"
    assert problems(nb) == []
    nb = nbformat.reads(good.read_text(), as_version=4)  # multi-line strings joined again
    bar_out, scratch, widget, check = (c["outputs"] for c in nb["cells"])
    assert bar_out[0]["data"]["text/plain"].startswith("four: 100%|")
    assert scratch[0]["data"] == {"text/plain": ""}
    data = widget[0]["data"]
    assert set(data) == {"application/vnd.jupyter.widget-view+json", "image/png", "text/plain"}
    assert base64.b64decode(data["image/png"])[:4] == b"\x89PNG"
    assert [o["output_type"] for o in check] == ["stream"] and "agrees exactly" in check[0]["text"]
    # the same checker on what a tqdm widget stores: its text copy reads 0%
    found = problems(json.loads(old.read_text()))
    assert len(found) == 1 and "below 100%" in found[0] and "widget bar:   0%" in found[0]


def test_lessons_are_named_by_number_or_path(tmp_path):
    assert [p.name[:2] for p in lessons.lessons(["7", "01"])] == ["07", "01"]
    assert [lessons.lesson_id(p) for p in lessons.lessons(["2", "02", "2b", "02B"])] == ["02", "02", "02b", "02b"]
    assert len(lessons.lessons()) == len(LESSONS)
    with pytest.raises(ValueError, match="'11' is not a lesson"):
        lessons.lessons(["11"])
    with pytest.raises(ValueError, match="'2z' is not a lesson"):
        lessons.lessons(["2z"])
    with pytest.raises(FileNotFoundError, match="There is no notebook"):
        lessons.lessons([str(tmp_path / "x.ipynb")])
    assert lessons.main(["warm", "banana"]) == 2


# ------------------------------------------------------------------------------- the lessons
@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_stamped_lessons_store_readable_outputs(path):
    """Only lessons saved by the course's execution path (stamped) are held to this: others keep the
    outputs of an earlier run until they are executed again (``make lessons``)."""
    nb = json.loads(path.read_text())
    if not stamped(nb):
        pytest.skip(f"{path.name} was not saved by `make lessons` (no '{STAMP}' stamp in its metadata)")
    assert problems(nb) == []


def _last_call(source: str):
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if body and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Call):
        f = body[-1].value.func
        return getattr(f, "id", None) or getattr(f, "attr", None)
    return None


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_sources_print_no_stray_values_and_use_the_course_bar(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"] == lessons.KERNELSPEC
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        if _last_call(source) in ("cmp", "check"):
            assert source.rstrip().endswith(";"), f"cell {i + 1} ends in a check whose value would be printed"
        assert "tqdm.auto" not in source and "tqdm.notebook" not in source, f"cell {i + 1}: use lmcourse.progress"


# ------------------------------------------------------------------------------- the static site
def test_the_book_holds_every_lessons_figures_and_fetches_nothing(tmp_path):
    import re

    from lmcourse.authoring import book

    pages = book.build(tmp_path / "book")
    assert [p["file"] for p in pages] == [f"{path.stem}.html" for path in LESSONS]
    index = (tmp_path / "book" / "index.html").read_text()
    assert f"<p>{len(LESSONS)} lessons, each a notebook" in index
    for path, page in zip(LESSONS, pages):
        nb = json.loads(path.read_text())
        stored = sum(1 for c in nb["cells"] for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
        text = (tmp_path / "book" / page["file"]).read_text()
        assert stored >= 1 and len(re.findall(r'<img [^>]*src="data:image/png;base64,', text)) >= stored, path.name
        assert f'href="{page["file"]}"' in index
        assert not re.search(r'<script[^>]+src="(https?:)?//', text), f"{page['file']} loads a script from the network"
        assert "application/vnd.jupyter.widget-view+json" not in text
        assert ".ipynb\"" not in re.sub(r'href="https?://[^"]*"', "", text), "a link to a notebook, not its page"
    if book.mathjax_source() is not None:
        assert (tmp_path / "book" / "mathjax" / "MathJax.js").is_file()
        assert 'src="mathjax/MathJax.js?config=' in (tmp_path / "book" / pages[0]["file"]).read_text()


def test_the_book_shows_a_widgets_static_copy():
    from lmcourse.authoring import book

    nb = nbformat.from_dict(notebook(
        display({"application/vnd.jupyter.widget-view+json": WIDGET, "image/png": "iVBORw0KGgo=", "text/plain": "(k)"}),
        display({"application/vnd.jupyter.widget-view+json": WIDGET, "text/plain": "(no copy)"}),
        metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}}}))
    assert book.static_copy(nb) == 1
    first, second = (o["data"] for o in nb.cells[1].outputs)
    assert set(first) == {"image/png", "text/plain"} and "application/vnd.jupyter.widget-view+json" in second
    assert "widgets" not in nb.metadata


@pytest.mark.parametrize("text, kind", [
    ("Loaded the run from /tmp/lmcourse-09-z83tilkr/awd-lstm-ptb-ci.\n", "a folder of this machine"),
    ("saved in /home/ada/lmcourse/data/runs/x.pt\n", "a folder of this machine"),
    ("'/root/out/log'\n", "a folder of this machine"),
    ("trained on 2026-11-27 07:38 (3 epochs)\n", "a date"),
])
def test_a_machine_folder_or_a_date_in_an_output_is_named(text, kind):
    found = output_problems(stream(text, "stdout"))
    assert len(found) == 1 and found[0].startswith(kind), found


@pytest.mark.parametrize("text", ["runs/awd-lstm-ptb-ci and data/runs/x.pt, relative\n", "ratio 2026/11\n",
                                  "0.5/1.0 and 12/31\n", "version 2026-13-45\n"])
def test_relative_paths_and_plain_numbers_are_not_flagged(text):
    assert output_problems(stream(text, "stdout")) == []


def test_a_lesson_shows_a_warning_without_a_folder_of_the_machine():
    """In a Jupyter kernel, importing lmcourse makes a warning one sentence: its stored output names no source file."""
    import subprocess
    import sys

    code = ("import sys, types, warnings; sys.modules['ipykernel'] = types.ModuleType('ipykernel'); import lmcourse; "
            "warnings.warn('The stored run x cannot be used;\\n training it again.', RuntimeWarning)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "warning: The stored run x cannot be used; training it again."
    assert output_problems({"output_type": "stream", "name": "stderr", "text": done.stderr}) == []


def test_a_cell_that_keeps_a_runs_dates_is_named():
    nb = {"cells": [{"cell_type": "code", "source": "1", "outputs": [],
                     "metadata": {"execution": {"iopub.execute_input": "2026-11-23T02:37:54Z"}}}]}
    assert problems(nb) == ["cell 1 (code cell 1): keeps the dates of a run in metadata.execution"]
    nb["cells"][0]["metadata"] = {}
    assert problems(nb) == []


def test_a_figure_shown_as_its_text_is_named():
    as_text = {"output_type": "execute_result", "data": {"text/plain": "<Figure size 1000x460 with 1 Axes>"}}
    assert output_problems(as_text) == ["a figure shown as its text, not drawn: <Figure size 1000x460 with 1 Axes>"]
    drawn = {"output_type": "display_data", "data": {"text/plain": "<Figure size 1000x460 with 1 Axes>",
                                                      "image/png": "iVBORw0KGgo="}}
    assert output_problems(drawn) == []
