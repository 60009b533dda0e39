"""lmcourse: the implementations behind the course's lessons.

Importing the package first sets a passive OpenMP wait policy. On a small machine, torch's
default spinning worker threads slow down many-fold whenever another process (a Jupyter
server, a second test) holds a core; waiting passively avoids that. It only takes effect when
lmcourse is imported before torch, which is what every notebook does.

It also fixes glibc's mmap threshold (:mod:`lmcourse.memory`), so that training on the CPU does not
grow the heap by one logits buffer per batch.
"""
import os as _os

_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .memory import limit_heap_growth as _limit_heap_growth  # noqa: E402

_limit_heap_growth()

from . import config as _config  # noqa: E402
from .config import device, seed_everything  # noqa: E402
from .lm import LanguageModel, bits_per_char, perplexity  # noqa: E402
from .vocab import Vocab  # noqa: E402

__all__ = [
    "DATASET", "SCALE", "device", "seed_everything",
    "Vocab", "LanguageModel", "perplexity", "bits_per_char",
]
__version__ = "0.1.0"


def __getattr__(name: str):
    """``lmcourse.SCALE`` and ``lmcourse.DATASET`` are read from the config on use, so a bad
    LMCOURSE_SCALE or LMCOURSE_DATASET never stops the import."""
    if name in ("SCALE", "DATASET"):
        return getattr(_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
