"""The course itself (floor 5: stands on everything but the authoring tools and the command line): what the lessons
import. The tools that run, stamp, check and publish the lessons live a floor up, in :mod:`lmcourse.authoring`.

- :mod:`.cmp`: the verdict of an on-screen derivation against the package;
- :mod:`.results`: the results table that every lesson adds its rows to;
- :mod:`.exercises`: the exercises' checks;
- :mod:`.runs`: the runs each lesson stores, one module per lesson; :mod:`.registry` gathers them and
  checks the committed reference runs against them; :mod:`.rank_runs`: lessons 05 and 06's rank-bound runs;
- :mod:`.catalog`: which lessons there are, and the lessons copied out into a student's folder;
- how a lesson presents: :mod:`.diagrams` (the course's diagrams), :mod:`.rendered` (take-aways as rendered
  Markdown, hidden inputs), :mod:`.notation` (symbols, the sign of a change, the corpus card).
"""
from .cmp import cmp

__all__ = ["cmp"]
