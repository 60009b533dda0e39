"""The command line, ``python -m lmcourse <command>`` (the top floor: stands on everything).

- :mod:`.main`: the parser, the error sentences and exit statuses, and the ``data`` and ``oracle`` commands;
- :mod:`.ngram`: the ``ngram`` command;
- :mod:`.reproduce`: ``train`` a paper's preset into a run directory, ``evaluate`` what it trained.
"""
