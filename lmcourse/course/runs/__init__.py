"""The runs each lesson stores, one module per lesson (and one for the word LSTM that several share).

A module here declares its runs in a dict ``RUNS``: a run's name and the function that gives, for a
scale, the list of settings dicts it trains (one per seed, variant, ...)::

    def _mos(scale):
        return [dict(d=8, epochs=6, seed=s, ...) for s in range(3)]

    RUNS = {"06-mos": _mos}

and, for a run that reads another level of its corpus than words, ``LEVELS = {"02b-char-lstm": "char"}``.
:mod:`lmcourse.course.registry` finds every module of this package by itself: a new module needs no
line anywhere else, and no module here imports the registry.
"""
