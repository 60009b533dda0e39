"""The mechanical checks of a lesson's presentation, each on small notebooks built here (one that breaks the rule
and one that keeps it), the exercise checks against the registry, and the sentence counter on known prose."""
import json

import pytest

from lmcourse.course import exercises as registry
from lmcourse.authoring import lint
from lmcourse.course.rendered import hide_input

SHOWN = [{"output_type": "stream", "name": "stdout", "text": "a result\n"}]


def md(source, kind="skip"):
    return {"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": kind}}, "source": source}


def code(source, kind="skip", outputs=(), hidden=False):
    cell = {"cell_type": "code", "metadata": {"slideshow": {"slide_type": kind}}, "source": source,
            "outputs": list(outputs), "execution_count": None}
    if hidden:
        hide_input(cell)
    return cell


def notebook(*cells):
    nb = {"cells": [dict(c, id=f"x{k:03d}") for k, c in enumerate(cells)], "metadata": {}, "nbformat": 4,
          "nbformat_minor": 5}
    return json.loads(json.dumps(nb))  # as read from disk


def checks(nb):
    return [(f.check, f.cell) for f in lint.check_notebook(nb)]


def title():
    return md("# Lesson 99\n\nThe claim.", "slide")


def test_slides_group_the_path_and_leave_skipped_cells_out():
    nb = notebook(title(), md("off the path"), md("## Two", "slide"), code("x", "-"), md("more", "fragment"),
                  md("## Three", "subslide"))
    assert lint.slides(nb) == [[0], [2, 3, 4], [5]]


def test_prose_announcing_a_skipped_result_is_found():
    announcing = notebook(title(), md("## Counting", "slide"), md("Let us count:", "fragment"),
                          code("count()", outputs=SHOWN), md("## Next", "slide"))
    assert ("announces-skipped", 2) in checks(announcing)
    shown = notebook(title(), md("## Counting", "slide"), md("Let us count:", "fragment"),
                     code("count()", "-", outputs=SHOWN), md("## Next", "slide"))
    quiet = notebook(title(), md("## Counting", "slide"), md("Let us count:", "fragment"), code("def f(): pass"),
                     md("## Next", "slide"))
    assert [f for f in lint.announces_skipped(shown)] == [] and lint.announces_skipped(quiet) == []


def test_a_slide_of_prose_alone_followed_by_skipped_results_is_found():
    nb = notebook(title(), md("## A loop", "slide"), code("def step(): pass"), md("checked:"),
                  code("cmp()", outputs=SHOWN), md("## Next", "slide"), md("## End", "slide"))
    assert [(f.check, f.cell) for f in lint.announces_skipped(nb)] == [("announces-skipped", 1)]
    last = notebook(title(), md("## What to take away", "slide"), md("## Exercises"), code("check()", outputs=SHOWN))
    assert lint.announces_skipped(last) == [], "the last slide is followed by the exercises, off the path"


def test_long_code_counts_the_visible_lines_only():
    body = "\n".join(f"x{i} = {i}" for i in range(31))
    nb = notebook(title(), md("## Code", "slide"), code(body, "-"), code(body, "-", hidden=True),
                  code("\n".join(body.splitlines()[:30]), "-"), code(body))
    assert [f.cell for f in lint.long_code(nb)] == [2]


def test_title_words_count_the_first_slide_with_a_formula_as_one_word():
    words = " ".join(["word"] * 95)
    nb = notebook(md(f"# Lesson 99\n\n{words} $a + b = c$.", "slide"), md("More words here.", "-"),
                  md("## Two", "slide"), md(" ".join(["other"] * 200), "-"))
    assert lint.title_words(nb) == 2 + 95 + 1 + 3  # "Lesson 99", the words, the formula, "More words here."
    assert ("title-words", 0) in checks(nb)
    assert "title-words" not in {c for c, _ in checks(notebook(md(f"# Lesson 99\n\n{words}", "slide")))}


def test_a_body_slide_over_the_word_cap_is_dense_counting_what_its_rendered_cells_show():
    cap = lint.MAX_SLIDE_WORDS
    rendered = [{"output_type": "display_data", "metadata": {},
                 "data": {"text/markdown": "- one more point", "text/plain": "<Markdown>"}}]
    printed = [{"output_type": "stream", "name": "stdout", "text": " ".join(["n"] * 500)}]
    at_cap = notebook(title(), md("## Two\n\n" + " ".join(["w"] * (cap - 1)), "slide"), code("show()", "-", printed))
    over = notebook(title(), md("## Two\n\n" + " ".join(["w"] * (cap - 1)), "slide"), code("takeaway(x)", "-", rendered,
                                                                                        hidden=True),
                    md("## Three", "slide"), md(" ".join(["w"] * cap), "skip"))
    assert lint.slide_words(at_cap, lint.slides(at_cap)[1]) == cap  # printed output is not prose
    assert "slide-words" not in {c for c, _ in checks(at_cap)}
    assert lint.slide_words(over, lint.slides(over)[1]) == cap + 3  # the heading and 119 words, then "one more point"
    assert [(c, k) for c, k in checks(over) if c == "slide-words"] == [("slide-words", 1)]  # a skipped cell is off
    long_title = notebook(md("# Lesson 99\n\n" + " ".join(["w"] * (cap + 5)), "slide"))
    assert "slide-words" not in {c for c, _ in checks(long_title)}, "the title slide has its own check"


def test_a_takeaway_must_hide_the_python_that_formats_it():
    output = [{"output_type": "display_data", "data": {"text/markdown": "- a point", "text/plain": "<Markdown>"},
               "metadata": {}}]
    shown = notebook(title(), md("## What to take away", "slide"), code("display(Markdown(f'- {x}'))", "-", output))
    hidden = notebook(title(), md("## What to take away", "slide"),
                      code("takeaway(f'{x}')", "-", output, hidden=True))
    called = notebook(title(), md("## Results", "slide"), code("takeaway(f'{x}')", "-", output))
    rendered = notebook(title(), md("## Results", "slide"), code("display(Markdown(table))", "-", output))
    assert [f.cell for f in lint.shown_takeaways(shown)] == [2]
    assert lint.shown_takeaways(hidden) == [] and lint.shown_rendered(hidden) == []
    assert [f.cell for f in lint.shown_takeaways(called)] == [2]
    assert lint.shown_takeaways(rendered) == [] and [f.cell for f in lint.shown_rendered(rendered)] == [2]


def test_a_slide_opens_with_a_heading():
    nb = notebook(title(), md("Prose first.", "slide"), code("plot()", "subslide", SHOWN), md("## Titled", "slide"))
    assert [f.cell for f in lint.untitled_slides(nb)] == [1, 2]


@pytest.fixture
def registered():
    """Three throwaway exercises: one that asks, one that tells, one that asks to predict 62 and [1, 3]."""
    ids = ["99.asks", "99.tells", "99.predict"]
    registry.exercise(ids[0], hint="which rows does the lookup touch?")(lambda a: "right")
    registry.exercise(ids[1], hint="divide V E by the total and let V grow.")(lambda a: "right")
    registry.exercise(ids[2], hint="how many rows are left?", predicts=lambda: (62, {3, 1}))(lambda a: "right")
    yield ids
    for id in ids:
        registry.REGISTRY.pop(id)


SOLUTION = "<details><summary>Solution</summary>\n\n```python\n# a comment is no heading\nx = 1\n```\n\n</details>"


def test_every_exercise_has_a_check_a_hint_that_asks_and_a_hidden_solution(registered):
    asks, tells, _ = registered
    nb = notebook(title(), md("## Exercises\n### Exercise 1 — fine"), code(f'check("{asks}", x);', outputs=SHOWN),
                  md(SOLUTION), md("### Exercise 2 — no check"), code("x = 1"), md(SOLUTION),
                  md("### Exercise 3 — a recipe, no solution"), code(f'check("{tells}", x);'),
                  md("### Exercise 4 — unknown"), code('check("99.nothing", x);'), md(SOLUTION))
    found = {(f.check, f.cell) for f in lint.exercise_findings(nb)}
    assert found == {("exercise-no-check", 4), ("hint-tells", 7), ("exercise-no-solution", 7),
                     ("exercise-no-check", 9)}
    assert [ex["title"] for ex in lint.exercises(nb)] == ["Exercise 1 — fine", "Exercise 2 — no check",
                                                          "Exercise 3 — a recipe, no solution", "Exercise 4 — unknown"]


def _run(text):
    return [{"output_type": "stream", "name": "stdout", "text": text}]


@pytest.mark.parametrize("printed, leaks", [
    ("batchify: (62, 16); window lengths: [35, 26]", True),   # a whole number predicted
    ("nonzero rows [1, 3]", True),                           # a set predicted, printed in order
    ("rows 1 and 3, 61 rows", False),                        # neither
    ("○ Exercise 99.predict: not attempted yet", False),     # the id is not a number
    ("62.5 tokens", False)])                                 # a whole number is matched exactly
def test_an_output_before_the_solution_may_not_show_the_predicted_values(registered, printed, leaks):
    predict = registered[2]
    nb = notebook(title(), md("### Exercise 1 — predict, then run"), code(f'check("{predict}", x);'),
                  code("run()", outputs=_run(printed)), md(SOLUTION), code("after()", outputs=_run("62 rows")))
    found = [(f.check, f.cell) for f in lint.exercise_findings(nb)]
    assert (("exercise-answer-shown", 3) in found) is leaks
    assert ("exercise-answer-shown", 5) not in found, "after the solution an output may show the answer"


@pytest.mark.parametrize("value, text, shown", [
    (0.1, "dropped in 0.103 of 20,000 draws", "0.103"),      # a measurement near the prediction
    (0.1, "dropped in 10.2% of the draws", "0.102"),         # a percentage
    (0.4988, "tying removes 0.4984 of the parameters", "0.4984"),
    (0.1, "dropped in 0.2 of the draws", None),
    (1000, "perplexity 1,000.0", "1000"),
    ("same", "the SAME perplexity twice", "same"),
    ({"softmax": 5, "mixture": 40}, "ranks 5 and 40", "5"),
    (True, "True", None)])
def test_the_predicted_value_matcher(value, text, shown):
    assert lint._shown(value, text) == shown


def test_sentences_split_at_full_stops_paragraphs_and_list_items():
    text = ("The model is tied, e.g. in the AWD-LSTM (Merity et al. 2018). Its vectors learn at every step! Why?\n\n"
            "- one item without a stop\n- another item, 0.5 in size.\n\nA last one with $x_t$ inside.")
    found = lint.sentences(text)
    assert found == ["The model is tied, eg in the AWD-LSTM (Merity et al 2018).", "Its vectors learn at every step!",
                     "Why?", "one item without a stop", "another item, 0.5 in size.", "A last one with $x_t$ inside."]


def test_words_per_sentence_reads_the_prose_and_skips_code_tables_and_solutions():
    nb = notebook(md("# Title words are no sentence\n\nOne two three four. Five six."),
                  md("| a | table | row |\n|---|---|---|\n| 1 | 2 | 3 |"), md("```python\nx = 1 + 2\n```"),
                  md(SOLUTION), code("x", outputs=[{"output_type": "display_data", "metadata": {},
                                                    "data": {"text/markdown": "Seven eight nine ten eleven twelve."}}]))
    assert lint.words_per_sentence(nb) == pytest.approx(6 / 2)
    assert lint.words_per_sentence(nb, generated=True) == pytest.approx(12 / 3)
    assert lint.words_per_sentence(notebook(code("x"))) == 0.0


def test_a_clean_lesson_passes_every_check(registered):
    asks = registered[0]
    nb = notebook(title(), md("## The idea", "slide"), code("plot()", "-", SHOWN), md("It shows the idea.", "fragment"),
                  md("## What to take away", "slide"),
                  code("takeaway(f'{x}')", "-", [{"output_type": "display_data", "metadata": {},
                                                  "data": {"text/markdown": "- a point"}}], hidden=True),
                  md("## Exercises\n### Exercise 1 — fine"), code(f'check("{asks}", x);', outputs=SHOWN), md(SOLUTION))
    assert lint.check_notebook(nb) == []
    row = lint.summary(nb)
    assert row["slides"] == 3 and row["findings"] == [] and row["title_words"] == 4


def test_check_lessons_reads_each_notebook(tmp_path):
    path = tmp_path / "99_demo.ipynb"
    path.write_text(json.dumps(notebook(title(), md("Untitled.", "slide"))))
    assert {name: [f.check for f in found] for name, found in lint.check_lessons([path]).items()} == {
        "99_demo.ipynb": ["untitled-slide"]}


def test_the_editors_guide_names_every_check():
    guide = (lint.lessons()[0].parents[1] / "docs" / "diagrams.md").read_text(encoding="utf-8")
    assert [c for c in lint.CHECKS if f"`{c}`" not in guide] == []


def test_every_lesson_passes_the_mechanical_checks():
    failing = {name: [str(f) for f in found] for name, found in lint.check_lessons().items() if found}
    assert failing == {}, json.dumps(failing, indent=1, ensure_ascii=False)
