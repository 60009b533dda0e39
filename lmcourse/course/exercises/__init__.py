"""Exercises that check themselves.

Each lesson ends with exercises. The student writes an answer (a function, a number, a choice) in
a stub cell and runs ``check(id, answer)``, which prints one of three verdicts:

- ``✓`` the answer is right, and what that shows;
- ``✗`` what is wrong with it, in one sentence (never just "False");
- ``○`` not attempted yet, with a hint. An unsolved exercise never stops "Run All".

The checks live in one module per lesson (``lmcourse.course.exercises.lesson05`` for ids ``"05.*"``) and
register themselves with :func:`exercise`. A check builds its own small inputs, so it runs in a
few seconds and does not depend on the notebook's state. The reference answers are in
``notebooks/solutions/<lesson>.py`` (``ANSWERS``, with deliberately wrong answers in ``WRONG``);
the test suite runs every check against both, so no exercise can rot. With
``LMCOURSE_EXERCISES=strict`` a wrong or missing answer raises instead of printing.

A "predict, then run" exercise declares what the student predicts: ``exercise(id, hint, predicts=...)``, a
tuple of values (numbers, strings, lists or sets of numbers, dicts of them) or a function returning it when
the values take work to compute. :mod:`lmcourse.authoring.lint` then checks that no output stored before the
exercise's solution shows one of them, so that the lesson does not print the answer before it is asked.
"""
from __future__ import annotations

import importlib
import os

from .registry import REGISTRY, Exercise, Unsolved, Wrong, choose, exercise, is_unsolved, multiple_choice

__all__ = ["Wrong", "Unsolved", "Exercise", "REGISTRY", "exercise", "multiple_choice", "check", "get", "is_unsolved",
           "choose", "predicted"]


def predicted(id: str) -> tuple:
    """The values exercise ``id`` asks a student to predict (empty for an exercise that asks for none)."""
    values = get(id).predicts
    values = values() if callable(values) else values
    return tuple(values) if isinstance(values, (tuple, list)) else (values,)


def get(id: str) -> Exercise:
    """The exercise ``id``, importing its lesson's module on first use."""
    if id not in REGISTRY:
        lesson = id.split(".", 1)[0]
        try:
            importlib.import_module(f"{__name__}.lesson{lesson}")
        except ModuleNotFoundError:
            pass
    if id not in REGISTRY:
        raise KeyError(f"There is no exercise {id!r}: check the id in the notebook's check(...) call.")
    return REGISTRY[id]



def strict() -> bool:
    return os.environ.get("LMCOURSE_EXERCISES", "").lower() == "strict"


def check(id: str, answer) -> bool:
    """Check ``answer`` for exercise ``id`` and print the verdict; True when it is right."""
    ex = get(id)
    try:
        if is_unsolved(answer):
            raise Unsolved
        message = ex.checker(answer)
    except (Unsolved, NotImplementedError):
        print(f"○ Exercise {id}: not attempted yet. Hint: {ex.hint}")
        if strict():
            raise Unsolved(f"Exercise {id} has no answer.") from None
        return False
    except Wrong as err:
        print(f"✗ Exercise {id}: {err}")
        if strict():
            raise
        return False
    except Exception as err:  # the student's code failed inside the check
        print(f"✗ Exercise {id}: your answer raised {type(err).__name__}: {err}")
        if strict():
            raise
        return False
    print(f"✓ Exercise {id}: {message}")
    return True
