"""The vocabulary: a fixed list of token strings and its inverse."""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

import torch

EOS = "<eos>"
UNK = "<unk>"


class Vocab:
    """``itos[i]`` is the string of id ``i``; ``stoi[s]`` is the id of string ``s``.

    ``source``: the fingerprint of the files the vocabulary and its corpus were read from, set by
    :func:`lmcourse.corpora.data.load_corpus` (None for a vocabulary made by hand); a stored run's key
    includes it. Two vocabularies are equal when their tokens are, whatever their sources."""

    def __init__(self, itos: Sequence[str], source: Optional[str] = None):
        self.source = source
        if isinstance(itos, str):
            raise TypeError("Vocab takes a list of token strings, got one string: split it first, "
                            "e.g. Vocab(text.split()).")
        self.itos = list(itos)
        bad = next((t for t in self.itos if not isinstance(t, str) or not t), None)
        if bad is not None:
            raise TypeError(f"Every token must be a non-empty string, got {bad!r}: build the vocabulary from text.")
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("The vocabulary lists a token twice: give each token string once.")

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens: {' '.join(self.itos[:8])} ...)"

    @property
    def eos(self) -> int:
        """The id of ``<eos>`` (for a character vocabulary, of the newline)."""
        for s in (EOS, "\n"):
            if s in self.stoi:
                return self.stoi[s]
        raise KeyError("This vocabulary has neither '<eos>' nor a newline to end a line with.")

    def encode(self, tokens: Iterable[str]) -> torch.Tensor:
        """Map strings to a 1-D LongTensor of ids; a string outside the vocabulary is an error."""
        if isinstance(tokens, str) and not all(len(t) == 1 for t in self.itos):
            raise TypeError("encode takes a list of words, got one string: split it first, e.g. "
                            "vocab.encode(text.split()).")
        tokens = list(tokens)
        try:
            return torch.tensor([self.stoi[t] for t in tokens], dtype=torch.long)
        except KeyError as err:
            hint = f" Map rare words to '{UNK}' first." if UNK in self.stoi else ""
            raise KeyError(f"The token {err.args[0]!r} is not in the vocabulary of {len(self)} tokens.{hint}") from None

    def decode(self, ids) -> list[str]:
        """Map ids (a tensor or a list) back to strings."""
        if isinstance(ids, torch.Tensor):
            if ids.dtype.is_floating_point or ids.dtype == torch.bool:
                raise TypeError(f"Token ids must be integers, got {ids.dtype}.")
            ids = ids.reshape(-1).tolist()
        ids = list(ids)
        if ids and (min(ids) < 0 or max(ids) >= len(self.itos)):
            raise ValueError(f"Token id {min(ids) if min(ids) < 0 else max(ids)} is outside the vocabulary of "
                             f"{len(self)} tokens: decode with the vocabulary the ids were made with.")
        return [self.itos[i] for i in ids]

    def to_text(self, ids) -> str:
        """Readable text: words joined by spaces with ``<eos>`` as a line break; characters joined as they are."""
        words = self.decode(ids)
        if all(len(w) == 1 for w in self.itos):
            return "".join(words)
        return " ".join(words).replace(f" {EOS} ", "\n").replace(EOS, "\n")
