r"""Corpora as token streams, and the AWD-LSTM way of cutting a stream into training batches.

A corpus is three 1-D streams of ids (train, valid, test) over one vocabulary. At the word level
every line of a file becomes ``line.split() + ['<eos>']`` (blank lines give just ``<eos>``), the
convention of the AWD-LSTM and pytorch ``word_language_model`` code, so the published token counts
hold: PTB 929,589 / 73,760 / 82,430 tokens over 10,000 types, WikiText-2 2,088,628 / 217,646 /
245,569 over 33,278 (Merity et al. 2017; Merity et al. 2018). At the character level the stream is the
characters of the text, the newline included.

Batching, as in AWD-LSTM's ``main.py`` (awd-lstm-lm code):

- ``batchify``: the stream :math:`x_0 \dots x_{N-1}` cut into :math:`B` contiguous columns,
  :math:`S[t, b] = x_{b n + t}` with :math:`n = \lfloor N / B \rfloor`;
- ``bptt_batches``: windows :math:`x = S[i:i+\ell]`, :math:`y = S[i+1:i+1+\ell]`;
- ``variable_bptt_batches``: the same with a random window length
  :math:`\ell = \max(\ell_{min}, \operatorname{int}(\mathcal{N}(\mu, \sigma^2)))`,
  :math:`\mu = \text{bptt}` with probability :math:`p`, else :math:`\text{bptt}/2`.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from . import config, download
from .vocab import EOS, Vocab

NAMES = (config.EMBEDDED, "ptb", "wikitext-2", "tinyshakespeare")
LEVELS = ("word", "char")
SPLITS = ("train", "valid", "test")
SHAKESPEARE_CUTS = (0.90, 0.95)  # train / valid / test = 90% / 5% / 5% of the characters
CACHE_MIN_BYTES = 1 << 20  # smaller corpora encode in a few ms: no token cache
CACHE_FORMAT = 1  # bump when the encoding changes, so that older caches are not read


@dataclass
class Corpus:
    """Three token streams over one vocabulary: ``train``, ``valid``, ``test`` are (N,) LongTensors."""

    name: str
    level: str
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    vocab: Vocab

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s} {len(getattr(self, s)):,}" for s in SPLITS)
        return f"Corpus({self.name!r}, {self.level} level: {sizes} tokens; vocabulary {len(self.vocab):,})"


# ---------------------------------------------------------------------------------------------
# Finding the text


def _unknown(name) -> ValueError:
    names = ", ".join(repr(n) for n in NAMES)
    return ValueError(f"Unknown corpus {name!r}: use one of {names}, or give the path of a folder "
                      "holding train.txt, valid.txt and test.txt.")


def _real_folder(name: str, data_dir) -> Path:
    """The folder holding a real corpus: found under the data folder (or the cache), else downloaded."""
    files = download.SOURCES[name]
    root = Path(data_dir) if data_dir is not None else config.data_dir()
    places = [root / name]
    if data_dir is None and config.cache_dir() != root:
        places.append(config.cache_dir() / name)
    for folder in places:
        if all((folder / f).is_file() for f in files):
            return download.fetch(files, folder)  # verifies the hashes; no network
    target = root / name if config.writable(root) else config.cache_dir() / name
    return download.fetch(files, target)


def _read(path: Path) -> str:
    with open(path, encoding="utf-8") as f:  # universal newlines: \r\n and \r read as \n
        text = f.read()
    if not text:
        raise ValueError(f"{path} is empty: every split needs some text.")
    return text


def _split_files(folder: Path) -> list[Path]:
    for split in SPLITS:
        if not (folder / f"{split}.txt").is_file():
            raise ValueError(f"The folder {folder} has no {split}.txt: a corpus folder needs train.txt, "
                             "valid.txt and test.txt.")
    return [folder / f"{s}.txt" for s in SPLITS]


def _line_start_at_or_after(text: str, k: int) -> int:
    """The first position >= k where a line begins (0, or just after a newline)."""
    if k <= 0:
        return 0
    j = text.find("\n", k - 1)
    return len(text) if j < 0 else j + 1


def split_shakespeare(text: str) -> list[str]:
    """Tiny Shakespeare has no official split: train / valid / test = the first 90%, next 5%, last 5%.

    The split is by characters, as Hugging Face / TFDS ``tiny_shakespeare`` do (nanoGPT uses 90 / 10),
    with each cut moved forward to the next line start so that every split begins a line.
    """
    n = len(text)
    a, b = (_line_start_at_or_after(text, int(f * n)) for f in SHAKESPEARE_CUTS)
    return [text[:a], text[a:b], text[b:]]


def _locate(name, data_dir) -> tuple[str, list[Path], Optional[Path]]:
    """(label, the text files: three splits or Tiny Shakespeare's one, the vocab.txt to use or None)."""
    if name is None or name == config.EMBEDDED:
        from . import embedded  # generated on first use

        folder = Path(embedded.ensure() if data_dir is None else embedded.ensure(Path(data_dir) / config.EMBEDDED))
        return config.EMBEDDED, _split_files(folder), folder / "vocab.txt"
    if isinstance(name, str) and name in download.SOURCES:
        folder = _real_folder(name, data_dir)
        return name, [folder / f for f in download.SOURCES[name]], None
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"The corpus name must be a string or a folder path, got {type(name).__name__}.")
    folder = Path(name)
    if not folder.is_dir():
        if isinstance(name, str) and os.sep not in name and "/" not in name:
            raise _unknown(name)
        raise ValueError(f"The folder {folder} does not exist: give a folder holding train.txt, valid.txt "
                         f"and test.txt, or one of the names {', '.join(NAMES)}.")
    vocab = folder / "vocab.txt"
    return folder.name, _split_files(folder), vocab if vocab.is_file() else None


def _texts(files: list[Path]) -> list[str]:
    if len(files) == 1:
        return split_shakespeare(_read(files[0]))
    return [_read(f) for f in files]


# ---------------------------------------------------------------------------------------------
# The token cache: encoding WikiText-2 takes about a second, reading its ids back a few ms.


def _cache_path(label: str, level: str, files: list[Path]) -> Optional[Path]:
    """Where the ids of these exact files (keyed by path, size and mtime) are cached; None for small corpora."""
    stats = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    if sum(s[1] for s in stats) < CACHE_MIN_BYTES:
        return None
    digest = hashlib.sha256(json.dumps([CACHE_FORMAT, level, stats]).encode()).hexdigest()[:16]
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)
    return config.cache_dir() / "tokens" / f"{safe}-{level}-{digest}.pt"


def _load_cached(path: Path):
    try:
        saved = torch.load(path, weights_only=True)
        streams, vocab = [saved[s] for s in SPLITS], Vocab(saved["itos"])
    except Exception:  # a missing or damaged cache is simply rebuilt
        return None
    if all(t.dtype == torch.long and t.dim() == 1 for t in streams):
        return streams, vocab
    return None


def _save_cached(path: Path, streams: list[torch.Tensor], vocab: Vocab) -> None:
    """Write atomically; replace older caches of the same corpus; skip silently where nothing can be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
        os.close(fd)
        try:
            torch.save({"itos": vocab.itos, **dict(zip(SPLITS, streams))}, tmp)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        for old in path.parent.glob(path.name.rsplit("-", 1)[0] + "-*.pt"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------
# Text to ids


def words_of(text: str) -> list[str]:
    """The word stream of a text: ``line.split() + ['<eos>']`` for every line, as one flat list."""
    if not text.endswith("\n"):
        text += "\n"  # a last line without its newline still ends with <eos>
    return text.replace("\n", f" {EOS} ").split()


def _encode_words(streams: list[list[str]], itos: list[str], vocab_file: Optional[Path]) -> list[torch.Tensor]:
    stoi = {s: i for i, s in enumerate(itos)}
    out = []
    for split, words in zip(SPLITS, streams):
        if vocab_file is None:  # every word is in the vocabulary built from these streams
            ids = np.fromiter(map(stoi.__getitem__, words), dtype=np.int64, count=len(words))
        else:
            ids = np.fromiter(map(stoi.get, words, repeat(-1)), dtype=np.int64, count=len(words))
        if vocab_file is not None and (ids < 0).any():
            word = words[int(np.argmax(ids < 0))]
            raise ValueError(f"The word {word!r} of {split}.txt is not in {vocab_file}: regenerate the corpus, "
                             "or delete vocab.txt to build the vocabulary from the text.")
        out.append(torch.from_numpy(ids))
    return out


def _word_corpus(texts: list[str], vocab_file: Optional[Path]) -> tuple[list[torch.Tensor], Vocab]:
    """Word ids; the vocabulary is vocab.txt's, else the types in order of first appearance over train, valid, test."""
    streams = [words_of(t) for t in texts]
    if vocab_file is not None:
        itos = [t for t in _read(vocab_file).split("\n") if t]
    else:
        seen: dict[str, None] = {}
        for words in streams:
            seen.update(dict.fromkeys(words))
        itos = list(seen)
    return _encode_words(streams, itos, vocab_file), Vocab(itos)


def _char_corpus(texts: list[str]) -> tuple[list[torch.Tensor], Vocab]:
    """Character ids; the vocabulary is the sorted set of characters over all splits."""
    codes = [np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32) for t in texts]  # Unicode code points
    present = np.zeros(int(max(c.max() for c in codes)) + 1, dtype=bool)
    for c in codes:
        present[c] = True
    points = np.flatnonzero(present)  # sorted code points = sorted characters
    lookup = np.zeros(len(present), dtype=np.int64)
    lookup[points] = np.arange(len(points))
    return [torch.from_numpy(lookup[c]) for c in codes], Vocab([chr(p) for p in points])


def load_corpus(name=None, level: str = "word", data_dir=None, cache: bool = True) -> Corpus:
    """Load a corpus as three token streams.

    ``name``: ``None`` or ``"embedded"`` (the generated corpus, offline), ``"ptb"``, ``"wikitext-2"``,
    ``"tinyshakespeare"`` (split 90 / 5 / 5 by characters, see :func:`split_shakespeare`), or a
    folder holding ``train.txt``, ``valid.txt``, ``test.txt`` (and optionally ``vocab.txt``, one
    token a line, used as the word vocabulary in that order). Real corpora are looked for as
    ``<data_dir>/<name>/`` (default :func:`lmcourse.config.data_dir`, then the cache folder) and
    downloaded, sha256-verified, when absent. ``level``: ``"word"`` or ``"char"``. With ``cache``,
    the ids of a corpus of 1 MB or more are kept under the cache folder, keyed by the files' paths,
    sizes and modification times, and read back (``weights_only``) while the files are unchanged.
    """
    if level not in LEVELS:
        raise ValueError(f"level={level!r} is not a level: use 'word' or 'char'.")
    label, files, vocab_file = _locate(name, data_dir)
    path = _cache_path(label, level, files + ([vocab_file] if vocab_file and level == "word" else []))
    cached = _load_cached(path) if cache and path is not None else None
    if cached is None:
        texts = _texts(files)
        cached = _char_corpus(texts) if level == "char" else _word_corpus(texts, vocab_file)
        if cache and path is not None:
            _save_cached(path, *cached)
    streams, vocab = cached
    return Corpus(label, level, *streams, vocab)


# ---------------------------------------------------------------------------------------------
# Batching


def _check_int(value, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}.")
    if value < low:
        raise ValueError(f"{what} must be at least {low}, got {value}.")
    return int(value)


def batchify(tokens: torch.Tensor, batch_size: int) -> torch.Tensor:
    r"""Cut a stream into ``batch_size`` contiguous columns: :math:`S[t, b] = x_{b n + t}`.

    Here :math:`n = \lfloor N/B \rfloor`; the last :math:`N - nB` tokens are dropped. Returns an
    (n, B) tensor on the stream's device.
    """
    batch_size = _check_int(batch_size, "batch_size")
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        raise ValueError("batchify needs a 1-D tensor of token ids: pass corpus.train, corpus.valid or corpus.test.")
    n = tokens.numel() // batch_size
    if n == 0:
        raise ValueError(f"The stream has {tokens.numel()} tokens, fewer than batch_size={batch_size}: "
                         "use a smaller batch size.")
    return tokens[: n * batch_size].view(batch_size, n).t().contiguous()  # (n, B)


def _check_source(source) -> None:
    if not isinstance(source, torch.Tensor) or source.dim() != 2 or source.size(0) < 2:
        raise ValueError("The source must be a (T, B) tensor with T >= 2 rows: "
                         "build it with batchify(tokens, batch_size).")


def bptt_batches(source: torch.Tensor, bptt: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Windows of ``bptt`` rows: ``x = S[i:i+l]``, ``y = S[i+1:i+1+l]``, i = 0, bptt, 2 bptt, ...

    ``l = min(bptt, T - 1 - i)``, so the last window may be shorter; together the ``y`` cover
    rows 1 .. T-1 exactly once. Yields (l, B) views of ``source``.
    """
    bptt = _check_int(bptt, "bptt")
    _check_source(source)
    T = source.size(0)
    for i in range(0, T - 1, bptt):
        length = min(bptt, T - 1 - i)
        yield source[i:i + length], source[i + 1:i + 1 + length]  # (l, B), (l, B)


def variable_bptt_batches(source: torch.Tensor, bptt: int, generator: torch.Generator, p: float = 0.95,
                          sigma: float = 5.0, min_len: int = 5, max_len: Optional[int] = None,
                          ) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
    r"""Windows of random length, as AWD-LSTM trains (Merity et al. 2018, Section 4.1).

    For each window: :math:`\mu = \text{bptt}` with probability ``p``, else ``bptt / 2``;
    :math:`\ell = \max(\ell_{min}, \operatorname{int}(\mathcal{N}(\mu, \sigma^2)))`, then
    :math:`\min(\ell, \ell_{max})` when ``max_len`` is given. Yields ``(x, y, seq_len)`` with
    ``x = S[i:i+l]``, ``y = S[i+1:i+1+l]`` and ``i`` advancing by ``seq_len``; the last window
    is cut at the end of the stream, while ``seq_len`` stays the drawn length (the one AWD-LSTM
    scales its learning rate by). All randomness comes from ``generator`` (a CPU generator).
    """
    bptt = _check_int(bptt, "bptt")
    min_len = _check_int(min_len, "min_len")
    if max_len is not None and _check_int(max_len, "max_len") < min_len:
        raise ValueError(f"max_len={max_len} is below min_len={min_len}: raise max_len or lower min_len.")
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator: pass torch.Generator().manual_seed(seed).")
    if not 0.0 <= p <= 1.0 or sigma < 0:
        raise ValueError(f"Need 0 <= p <= 1 and sigma >= 0, got p={p} and sigma={sigma}.")
    _check_source(source)
    T, i = source.size(0), 0
    while i < T - 1:
        mu = bptt if float(torch.rand((), generator=generator)) < p else bptt / 2
        seq_len = max(min_len, int(float(torch.normal(mu, sigma, (1,), generator=generator))))
        if max_len is not None:
            seq_len = min(seq_len, max_len)
        length = min(seq_len, T - 1 - i)
        yield source[i:i + length], source[i + 1:i + 1 + length], seq_len  # (l, B), (l, B), int
        i += length
