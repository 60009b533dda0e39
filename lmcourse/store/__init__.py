"""The store (floor 4: stands on :mod:`lmcourse.training` and below): what a lesson computed once, kept.

- :mod:`.stored_runs`: trained runs, stored and loaded by their key (name, settings, scale, dataset, corpus);
- :mod:`.stored_numbers`: long measurements, stored the same way;
- :mod:`.reference_runs`: those committed with the course in ``reference_runs/``, half precision, sha256-checked.
"""
