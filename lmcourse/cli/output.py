"""The last line every command prints: one line of strict JSON (RFC 8259), which has no ``Infinity`` or ``NaN``.

A perplexity can be infinite (a model that gives some token probability 0, such as an unsmoothed n-gram)
or not a number; :func:`print_json` writes such a value as ``null`` and says so in one note on stderr, so
that a program reading the line never meets a token its JSON parser refuses.
"""
from __future__ import annotations

import json
import math
import sys

__all__ = ["print_json", "strict"]


def strict(value, where: str = "", found: list | None = None):
    """``value`` with every float that is not finite replaced by None; the dotted names of those go to ``found``."""
    if isinstance(value, float) and not math.isfinite(value):
        if found is not None:
            found.append(f"{where} ({value})")
        return None
    if isinstance(value, dict):
        return {k: strict(v, f"{where}.{k}" if where else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v, f"{where}[{i}]", found) for i, v in enumerate(value)]
    return value


def print_json(result: dict) -> None:
    """Print ``result`` as the command's last line, strict JSON; non-finite numbers become null, with one note."""
    found: list = []
    line = json.dumps(strict(result, found=found), allow_nan=False)
    if found:
        what = "is not a finite number" if len(found) == 1 else "are not finite numbers"
        print(f"note: {', '.join(found)} {what}, which JSON cannot hold, so the JSON line below gives null instead.",
              file=sys.stderr, flush=True)
    print(line)
