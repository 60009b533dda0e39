"""Cells shown by their output alone: the take-away helper, the hidden-input flag, and every place that honours it
(the stamp of lmcourse/authoring/slides.py, the static decks of make slides and the book of make book)."""
import copy
import json

import nbformat
import pytest

from lmcourse.authoring import slides
from lmcourse.course import rendered
from lmcourse.course.rendered import HIDDEN_KEY, drop_hidden_inputs, hide_input, input_hidden, markdown, takeaway

FORMATTING = "SECRET_FORMATTING = 'the python behind the take-away'"


def test_takeaway_is_markdown_one_bullet_per_point():
    shown = takeaway("""Tying removes 42% of the parameters,
                        and lowers perplexity.""", "- **Rare words** gain most.", closing="Every model is tied.")
    assert shown._repr_markdown_() == ("- Tying removes 42% of the parameters,\n  and lowers perplexity.\n"
                                       "- **Rare words** gain most.\n\nEvery model is tied.")
    assert str(shown) == shown.text and shown != takeaway("Tying removes 42% of the parameters.")


def test_markdown_dedents_and_refuses_nothing():
    assert markdown("""
        | a | b |
        |---|---|
    """).text == "| a | b |\n|---|---|"
    with pytest.raises(ValueError, match="empty"):
        markdown("  \n ")
    with pytest.raises(ValueError, match="at least one point"):
        takeaway()
    with pytest.raises(ValueError, match="none empty"):
        takeaway("a point", " ")


def test_hide_input_sets_and_clears_jupyterlabs_flag():
    cell = {"cell_type": "code", "metadata": {"jupyter": {"outputs_hidden": False}}, "source": ""}
    assert not input_hidden(cell)
    assert hide_input(cell) is True and hide_input(cell) is False
    assert cell["metadata"]["jupyter"] == {"outputs_hidden": False, HIDDEN_KEY[1]: True} and input_hidden(cell)
    assert hide_input(cell, False) is True and cell["metadata"]["jupyter"] == {"outputs_hidden": False}
    bare = {"cell_type": "code", "metadata": {}, "source": ""}
    hide_input(bare)
    hide_input(bare, False)
    assert bare["metadata"] == {}, "removing the flag leaves no empty jupyter entry"


def _lesson_notebook(hidden: bool):
    """A two-slide notebook: a heading, and a take-away cell that renders Markdown from a variable."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A lesson\n\nThe claim.", id="aaaa"),
                nbformat.v4.new_markdown_cell("## What to take away", id="bbbb"),
                nbformat.v4.new_code_cell(f"{FORMATTING}\ntakeaway(f'...')", id="cccc"),
                nbformat.v4.new_markdown_cell("## Exercises", id="dddd")]
    nb.cells[2].outputs = [nbformat.v4.new_output("display_data", data={
        "text/markdown": "- RENDERED_POINT: the number is 42", "text/plain": "<Rendered>"})]
    for cell, kind in zip(nb.cells, ("slide", "slide", "-", "skip")):
        cell.metadata["slideshow"] = {"slide_type": kind}
    if hidden:
        hide_input(nb.cells[2])
    return nb


def test_drop_hidden_inputs_marks_only_hidden_code_cells():
    nb = _lesson_notebook(hidden=True)
    hide_input(nb.cells[0])  # a Markdown cell is shown by its rendering anyway
    assert drop_hidden_inputs(nb) == 1
    assert nb.cells[2].metadata["transient"] == {"remove_source": True}
    assert "transient" not in nb.cells[0].metadata


@pytest.mark.parametrize("hidden", [True, False])
def test_deck_and_book_leave_out_a_hidden_input_and_keep_its_output(tmp_path, hidden):
    from lmcourse.authoring import book, deck

    path = tmp_path / "99_demo.ipynb"
    nbformat.write(_lesson_notebook(hidden), str(path))
    deck.build(tmp_path / "slides", [path], mathjax=False, reveal=False)
    book.build(tmp_path / "book", [path], mathjax=False, results=False)
    for page in (tmp_path / "slides" / "99_demo.slides.html", tmp_path / "book" / "99_demo.html"):
        text = page.read_text(encoding="utf-8")
        assert "RENDERED_POINT" in text, f"{page.name} lost the take-away's output"
        assert ("SECRET_FORMATTING" in text) is not hidden, f"{page.name}: hidden={hidden}, but the input " + (
            "shows" if hidden else "is gone")


@pytest.fixture
def declared_hidden():
    """Lesson 01 with its take-away slide's cell declared hidden too, beside the cells the lesson hides
    (restored afterwards)."""
    saved = copy.deepcopy(slides.HIDDEN)
    lesson = "01"
    cell = slides.DEMO[lesson][-1][0]
    assert cell not in saved.get(lesson, ()), "the fixture needs a cell the lesson does not hide already"
    slides.HIDDEN[lesson] = tuple(saved.get(lesson, ())) + (cell,)
    yield lesson, cell
    slides.HIDDEN.clear()
    slides.HIDDEN.update(saved)


def test_the_stamp_writes_the_declared_hidden_inputs_and_only_those(declared_hidden):
    lesson, chosen = declared_hidden
    path = next(p for p in slides.lessons() if slides.lesson_id(p) == lesson)
    nb = json.loads(path.read_text(encoding="utf-8"))
    stray = next(c for c in nb["cells"] if c["cell_type"] == "code" and c["id"] not in slides.HIDDEN[lesson])
    hide_input(stray)  # collapsed by accident in JupyterLab
    assert {line.split(":")[0] for line in slides.differences(nb, lesson)} == {f"cell {chosen}", f"cell {stray['id']}"}
    assert slides.stamp(nb, lesson) == 2 and slides.stamp(nb, lesson) == 0
    assert {c["id"] for c in nb["cells"] if input_hidden(c)} == set(slides.HIDDEN[lesson])
    assert chosen in slides.HIDDEN[lesson] and stray["id"] not in slides.HIDDEN[lesson]
    assert slides.differences(nb, lesson) == []


def test_a_declared_hidden_cell_that_is_gone_is_named(declared_hidden):
    lesson, _ = declared_hidden
    slides.HIDDEN[lesson] = ("no-such-cell",)
    path = next(p for p in slides.lessons() if slides.lesson_id(p) == lesson)
    nb = json.loads(path.read_text(encoding="utf-8"))
    with pytest.raises(KeyError, match="no-such-cell"):
        slides.stamp(nb, lesson)


def test_rise_hides_the_collapsed_input_bar():
    css = (slides.NOTEBOOKS / "rise.css").read_text(encoding="utf-8")
    assert ".reveal" in css and "jp-InputPlaceholder" in css and "display: none" in css
    assert rendered.HIDDEN_KEY == ("jupyter", "source_hidden")
