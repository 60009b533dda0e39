"""How much of a corpus is English: the share of its word tokens and word types found in a dictionary.

The dictionary is Debian's ``wamerican`` word list (``/usr/share/dict/american-english``, case-folded),
together with the census names the embedded corpus draws from (``names.tsv``). Tokens that are not
words are left out of both counts: markup (``<eos>``, ``<unk>``, ``<doc>``, ``N``, ``-lrb-``),
punctuation, numbers and symbols (``$``). A word is lower-case letters, with inner apostrophes or
hyphens allowed ("o'clock", "well-known").

Run it on the embedded corpus (generated on first use) or on any folder holding ``train.txt``::

    python -m lmcourse.corpora.wordcheck [FOLDER]
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from .grammar import name_lists
from .embedded import ensure

DICTIONARY = Path("/usr/share/dict/american-english")
WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")
NUMBER = "N"  # PTB's stand-in for a number, a letter to the pattern above


def load_dictionary(path: Path | str = DICTIONARY) -> set[str]:
    """The case-folded words of a one-word-a-line list, plus the corpus's census names."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No dictionary at {path}: install Debian's word list (apt-get install wamerican) "
                                "or pass the path of another one-word-a-line list.")
    words = {w.strip().casefold() for w in path.read_text(encoding="utf-8", errors="replace").splitlines()}
    return words | {n for ns in name_lists().values() for n in ns}


def english_share(tokens, dictionary: set[str]) -> dict[str, float]:
    """Shares of word tokens and of word types found in ``dictionary`` (non-words left out):
    {"tokens": ..., "types": ..., "n_tokens": ..., "n_types": ...}."""
    counts = Counter(t.casefold() for t in tokens if t != NUMBER)
    words = {w: n for w, n in counts.items() if WORD.fullmatch(w)}
    if not words:
        raise ValueError("The text holds no words (only markup, numbers or punctuation): nothing to check.")
    known = [w for w in words if w in dictionary]
    n_tokens = sum(words.values())
    return {"tokens": sum(words[w] for w in known) / n_tokens, "types": len(known) / len(words),
            "n_tokens": n_tokens, "n_types": len(words)}


def check_folder(folder: Path | str, dictionary: Path | str = DICTIONARY, split: str = "train") -> dict[str, float]:
    """:func:`english_share` of one split (a file of whitespace-separated tokens) of a corpus folder."""
    text = (Path(folder) / f"{split}.txt").read_text(encoding="utf-8")
    return english_share(text.split(), load_dictionary(dictionary))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        folder = Path(argv[0])
    else:
        folder = ensure()
    share = check_folder(folder)
    print(f"{folder}: {share['tokens']:.1%} of {share['n_tokens']:,} word tokens and {share['types']:.1%} of "
          f"{share['n_types']:,} word types are dictionary words ({DICTIONARY}, case-folded, plus the census names)")


if __name__ == "__main__":
    main()
