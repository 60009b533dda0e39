"""The course's authoring tools (floor 6, beside the command line): what runs, stamps, checks and publishes the
lessons. A student never needs them, and no lesson imports them (``tests/test_layout.py`` checks that no notebook
reaches this room through any chain of imports); they stand on the course and the store, which never import them.

- :mod:`.lessons`: the lessons executed headless (``make warm``, ``make lessons``, ``make runs``);
- :mod:`.outputs`: what a saved lesson shows without a kernel, checked;
- :mod:`.slides`: each lesson's demo path and hidden inputs (``DEMO``, ``HIDDEN``), stamped as slide types;
- :mod:`.deck`: the static slide decks (``make slides``); :mod:`.book`: the static site (``make book``);
- :mod:`.results_page`: the book's results page, and the README's headline figure;
- :mod:`.lint`: the mechanical checks of a lesson;
- :mod:`.release`: each lesson's set-up cell and licence footer.

Each runs as ``python -m lmcourse.authoring.<module>``. Copying the lessons out into a student's folder
(``python -m lmcourse notebooks``) is not authoring: it lives in :mod:`lmcourse.course.catalog`.
"""
