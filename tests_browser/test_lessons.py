"""Every lesson in notebooks/, run the way a student runs it: JupyterLab in Chromium, Run All at ci scale.

For each lesson: no error output or stderr traceback, every figure drawn, every widget rendered as
a widget, each slider (up to six) moves and changes what the outputs show, and the lesson file in
the lab's copy is not rewritten (autosave is off). Lessons are found by glob, so new ones are
tested as soon as they exist.
"""
from pathlib import Path

import pytest

import student

REPO = Path(__file__).resolve().parents[1]
LESSONS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("notebook", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_in_the_browser(page, lab, notebook):
    copy = lab.root / notebook.name
    before = copy.read_bytes()
    visit = student.Student(page, lab, copy, timeout=student.TIMEOUT).run()
    student.LOG.append(visit.summary())
    assert not visit.problems, f"{notebook.stem} in the browser:\n" + "\n".join(visit.problems)
    assert copy.read_bytes() == before, (f"{notebook.stem}: JupyterLab rewrote the lesson during the run; "
                                         "autosave must be off in the test's settings.")
