"""The exercises' registry: each lesson's module registers its checks with :func:`exercise`; the package
(:mod:`lmcourse.course.exercises`) imports that module when one of its checks is first asked for."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Wrong", "Unsolved", "Exercise", "REGISTRY", "exercise", "multiple_choice", "is_unsolved", "choose"]


class Wrong(AssertionError):
    """Raised by a check: the message says what is wrong with the answer."""


class Unsolved(Exception):
    """The answer is still the stub (``None``, ``...``, or a function raising NotImplementedError)."""


@dataclass(frozen=True)
class Exercise:
    id: str  # "05.rank": lesson number, then a name
    hint: str
    checker: Callable[[Any], str]  # answer -> what a right answer shows; raises Wrong
    predicts: Any = ()  # what a "predict, then run" exercise asks for: a tuple of values, or a function giving it


REGISTRY: dict[str, Exercise] = {}


def exercise(id: str, hint: str, predicts: Any = ()) -> Callable:
    """Register ``checker(answer) -> message`` as the check of exercise ``id``; ``predicts``: the values a
    student predicts before running a cell (a tuple, or a function of no arguments returning one)."""
    def register(checker: Callable[[Any], str]) -> Callable[[Any], str]:
        REGISTRY[id] = Exercise(id, hint, checker, predicts)
        return checker
    return register


def is_unsolved(answer) -> bool:
    """True for the stubs a lesson hands out: ``None`` and ``...``."""
    return answer is None or answer is Ellipsis


def choose(answer, options: str, right: str, why_not: dict) -> str:
    """The letter ``answer`` picks among ``options`` ("abc"), if it is ``right``; else Wrong with ``why_not[letter]``."""
    letter = str(answer).strip().strip("()").lower()
    if letter not in options or len(letter) != 1:
        raise Wrong(f"answer one letter: {', '.join(repr(o) for o in options)}, not {answer!r}.")
    if letter != right:
        raise Wrong(f"({letter}) is not it: {why_not[letter]}")
    return letter


def multiple_choice(id: str, right: str, why_not: dict, hint: str, explanation: str) -> Callable[[Any], str]:
    """Register a question answered by one letter: ``right`` passes with ``explanation``; each wrong letter
    gets its sentence from ``why_not``, which lists every other option."""
    options = "".join(sorted({right, *why_not}))

    def checker(answer) -> str:
        choose(answer, options, right, why_not)
        return explanation
    return exercise(id, hint)(checker)
