"""Every lesson's exercises: at least three, each checked against its reference answer and a wrong one.

For each notebook: the "Exercise" headings are counted; every ``check("NN.name", ...)`` call names a
registered check; ``notebooks/solutions/<notebook>.py`` gives an answer that passes it (strict mode)
and at least one wrong answer that it rejects; and the solution shown (collapsed) in the notebook
is the code of the solutions file, so what a student reads is what CI checks.
"""
import importlib.util
import json
import re
from pathlib import Path

import pytest

from lmcourse.course import exercises

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]*_*.ipynb"))
CHECK_CALL = re.compile(r"""check\(\s*["'](\d\d[a-z]?\.[\w-]+)["']""")
HEADING = re.compile(r"^\s*#+\s*Exercise", re.I | re.M)
DETAILS_CODE = re.compile(r"<details>.*?```python\n(.*?)```.*?</details>", re.S)


def _cells(nb: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == kind]


def _solutions(nb: Path):
    path = nb.parent / "solutions" / f"{nb.stem}.py"
    assert path.is_file(), f"{nb.name} has exercises but no reference answers in solutions/{path.name}."
    spec = importlib.util.spec_from_file_location(f"solutions_{nb.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path.read_text()


def _normal(code: str) -> str:
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("LMCOURSE_EXERCISES", "strict")


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_lesson_has_three_checked_exercises(nb):
    headings = sum(bool(HEADING.match(c)) for c in _cells(nb, "markdown"))
    ids = sorted({i for c in _cells(nb, "code") for i in CHECK_CALL.findall(c)})
    assert headings >= 3, f"{nb.name} has {headings} 'Exercise' headings; the lesson standard asks for 3."
    assert len(ids) >= 3, f"{nb.name} checks {len(ids)} exercises; each exercise needs a check(...) call."
    module, text = _solutions(nb)
    for id in ids:
        ex = exercises.get(id)
        assert id in module.ANSWERS, f"solutions/{nb.stem}.py has no reference answer for {id}."
        assert exercises.check(id, module.ANSWERS[id]), f"The reference answer to {id} fails its own check."
        wrong = module.WRONG.get(id, [])
        assert wrong, f"solutions/{nb.stem}.py gives no wrong answer for {id}: a check must be seen to fail."
        for answer in wrong:
            with pytest.raises(exercises.Wrong):
                ex.checker(answer)
        with pytest.raises(exercises.Unsolved):
            exercises.check(id, None)


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_shown_solutions_are_the_checked_ones(nb):
    shown = [code for c in _cells(nb, "markdown") for code in DETAILS_CODE.findall(c)]
    assert shown, f"{nb.name} shows no collapsed solution (<details> with a python block)."
    _, text = _solutions(nb)
    for code in shown:
        assert _normal(code) in _normal(text), (
            f"{nb.name} shows a solution that is not in solutions/{nb.stem}.py:\n{code[:200]}")


def test_unsolved_prints_a_hint_and_passes_without_strict(monkeypatch, capsys):
    monkeypatch.delenv("LMCOURSE_EXERCISES")

    @exercises.exercise("99.demo", hint="return 2")
    def _demo(answer):
        if answer() != 2:
            raise exercises.Wrong(f"it returned {answer()}, but the sum of 1 and 1 is 2.")
        return "1 + 1 = 2."

    def stub():
        raise NotImplementedError

    assert exercises.check("99.demo", stub) is False
    assert "not attempted yet. Hint: return 2" in capsys.readouterr().out
    assert exercises.check("99.demo", lambda: 3) is False
    assert "it returned 3" in capsys.readouterr().out
    assert exercises.check("99.demo", lambda: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out
    assert exercises.check("99.demo", lambda: 2) is True
    monkeypatch.setenv("LMCOURSE_EXERCISES", "strict")
    with pytest.raises(exercises.Wrong):
        exercises.check("99.demo", lambda: 3)
    with pytest.raises(KeyError, match="no exercise"):
        exercises.get("98.nothing")


def _answer_pieces(function) -> set[str]:
    """The code a reference answer is made of: each statement and expression of 12 characters or more."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    pieces = set()
    for node in ast.walk(tree.body[0]):
        if isinstance(node, ast.Assign) or (isinstance(node, ast.expr) and not isinstance(node, (ast.Name,
                                                                                                ast.Attribute))):
            text = ast.unparse(node)
            if len(text) >= 12:
                pieces.add(re.sub(r"\s+", "", text))
    return pieces


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_hints_guide_without_giving_the_answer(nb):
    module, _ = _solutions(nb)
    for id, answer in module.ANSWERS.items():
        if not callable(answer):
            continue
        hint = re.sub(r"\s+", "", exercises.get(id).hint)
        given = sorted(p for p in _answer_pieces(answer) if p in hint)
        assert not given, f"the hint of {id} contains its answer's code: {given}"


def test_the_students_page_counts_each_lessons_exercises_right():
    """The students' lesson table (docs/students.md) says "N exercises" per lesson: N is the number of "Exercise N"
    headings."""
    page = (NOTEBOOKS[0].parents[1] / "docs" / "students.md").read_text()
    one = re.compile(r"^#+\s*Exercise\b", re.M)
    for nb in NOTEBOOKS:
        row = re.search(rf"^\| \[`{re.escape(nb.stem)}`\]\([^)]*\) \|.*?(\d+) exercises? \|$", page, re.M)
        assert row, f"docs/students.md's lesson table has no row for {nb.stem} ending in its number of exercises."
        counted = sum(len(one.findall(c)) for c in _cells(nb, "markdown"))
        assert int(row[1]) == counted, (f"docs/students.md says {nb.stem} has {row[1]} exercises; the lesson has "
                                        f"{counted}: fix its lesson table.")
