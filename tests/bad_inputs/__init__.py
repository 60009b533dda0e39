"""Bad and edge inputs, the way a careless user or a hostile file would give them, one file per module
of the package (``test_corpora.py`` for :mod:`lmcourse.corpora`, ``test_cli.py`` for the command line, ...).

Each case asserts three things: the exit status (command line) or the exception type (library);
one sentence naming what was wrong and what to do, never a traceback; and that nothing was
written or lost (the files under the test's folders are exactly what they were).
"""
