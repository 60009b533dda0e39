"""Keep a long CPU training run's resident memory flat.

A language model's step allocates a few large tensors of the same size every batch: the logits and
their gradient, (T * B, V) floats, 28 MB for T = 35, B = 20, V = 10,000. glibc's allocator serves
blocks above its *mmap threshold* straight from the kernel and returns them on ``free``; smaller blocks
come from its heap, whose freed space it keeps. By default the threshold adapts: each time a mapped
block is freed, the threshold rises to that block's size (up to 32 MiB on 64-bit Linux). After the
first batch the logits no longer qualify, they land in the heap, and the heap grows by roughly one
logits buffer per batch without ever giving memory back: a one-epoch run on the embedded corpus
reached several GB and kept growing.

Setting the threshold once, by hand, switches the adaptation off. Buffers above it are mapped and
returned every time (a little page-faulting), everything below stays on the heap. See
``benchmarks/bench_memory.py`` for the measured memory and speed at several thresholds.

Only glibc on Linux behaves this way; elsewhere :func:`limit_heap_growth` does nothing.
``LMCOURSE_MMAP_THRESHOLD=0`` leaves the allocator alone; a positive number of bytes sets another
threshold.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

from .errors import ConfigError

M_MMAP_THRESHOLD = -3  # mallopt parameter number, from glibc's <malloc.h>
DEFAULT_THRESHOLD = 4 * 1024 * 1024  # bytes; blocks above 4 MiB are mapped and given back on free


def threshold_setting() -> int:
    """The threshold ``LMCOURSE_MMAP_THRESHOLD`` asks for (default 4 MiB), or a :class:`ConfigError`."""
    raw = os.environ.get("LMCOURSE_MMAP_THRESHOLD", "").strip()
    if not raw:
        return DEFAULT_THRESHOLD
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"LMCOURSE_MMAP_THRESHOLD={raw!r} is not a number of bytes >= 0: set it to, say, "
                          f"{DEFAULT_THRESHOLD}, to 0 to leave the allocator alone, or unset it.")
    return value


def _threshold_from_env() -> int:
    """The threshold applied on import: a bad setting never stops the import, it falls back to the
    default with a note (the command line, started with ``-m``, stops on it instead, with status 2)."""
    try:
        return threshold_setting()
    except ConfigError as err:
        if sys.argv[:1] != ["-m"]:  # Python sets argv[0] to "-m" while it imports the package of `python -m`
            print(f"lmcourse: {err} Using {DEFAULT_THRESHOLD} for now.", file=sys.stderr)
        return DEFAULT_THRESHOLD


def limit_heap_growth(threshold: int | None = None) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes; True when the allocator accepted it.

    Returns False (and changes nothing) off Linux, without glibc, or when the threshold is 0.
    """
    threshold = _threshold_from_env() if threshold is None else int(threshold)
    if threshold <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, min(threshold, 2**31 - 1)))
