"""The command line, ``python -m lmcourse <command>`` (the top floor: stands on everything).

- :mod:`.main`: the parser, the error sentences and exit statuses, and the ``data`` and ``oracle`` commands;
- :mod:`.ngram`: the ``ngram`` command;
- :mod:`.reproduce`: ``train`` a paper's preset into a run directory, ``evaluate`` what it trained;
- :mod:`.word_lstm`: the word LSTM of pytorch/examples' recipe, through the one function that trains it.
- :mod:`.stop`: Ctrl-C ends a command within seconds, even inside one long step.
"""
