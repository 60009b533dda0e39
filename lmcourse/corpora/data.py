r"""Corpora as token streams, and the AWD-LSTM way of cutting a stream into training batches.

A corpus is three 1-D streams of ids (train, valid, test) over one vocabulary. At the word level
every line of a file becomes ``line.split() + ['<eos>']`` (blank lines give just ``<eos>``), the
convention of the AWD-LSTM and pytorch ``word_language_model`` code, so the published token counts
hold: PTB 929,589 / 73,760 / 82,430 tokens over 10,000 types, WikiText-2 2,088,628 / 217,646 /
245,569 over 33,278 (Merity et al. 2017; Merity et al. 2018). At the character level the stream is the
characters of the text, the newline included. Files are read as UTF-8; a leading byte-order mark is
dropped.

The vocabulary comes from the training text alone, so valid and test never change it:

- words: the types of train.txt in order of first appearance, those seen fewer than ``min_count``
  times left out, and ``<unk>`` (appended when train.txt lacks it). Every other word of any split
  is read as ``<unk>``; ``Corpus.unk_mapped`` counts them per split. PTB and WikiText-2 already map
  rare words to ``<unk>`` in their files, so nothing is mapped there and their vocabularies stay
  10,000 and 33,278. A folder's ``vocab.txt``, when present, is the vocabulary instead, and a word
  outside it is an error;
- characters: the sorted characters of train; a character of valid or test unseen in train is
  read as U+FFFD (the replacement character), added to the vocabulary only then.

Batching, as in AWD-LSTM's ``main.py`` (awd-lstm-lm code):

- ``batchify``: the stream :math:`x_0 \dots x_{N-1}` cut into :math:`B` contiguous columns,
  :math:`S[t, b] = x_{b n + t}` with :math:`n = \lfloor N / B \rfloor`;
- ``bptt_batches``: windows :math:`x = S[i:i+\ell]`, :math:`y = S[i+1:i+1+\ell]`;
- ``variable_bptt_batches``: the same with a random window length
  :math:`\ell = \max(\ell_{min}, \operatorname{int}(\mathcal{N}(\mu, \sigma^2)))`,
  :math:`\mu = \text{bptt}` with probability :math:`p`, else :math:`\text{bptt}/2`.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import torch

from .. import config
from ..checksum import atomic_write, seal, verify
from ..errors import ConfigError, CorpusError, check_int, check_number
from ..vocab import EOS, UNK, Vocab
from . import download, embedded

NAMES = config.DATASETS
LEVELS = ("word", "char")
SPLITS = ("train", "valid", "test")
ONE_FILE_CUTS = (0.90, 0.95)  # train / valid / test = 90% / 5% / 5% of the characters
CACHE_MIN_BYTES = 1 << 20  # smaller corpora encode in a few ms: no token cache
CACHE_FORMAT = 3  # bump when the encoding or the cache file changes, so that older caches are not read
UNSEEN_CHAR = "\ufffd"  # the replacement character: a character of valid or test unseen in train
DIGESTS = "file-digests.json"  # in the cache folder: each large corpus file's sha256 under its identity (file_digests)
DIGESTS_KEPT = 256  # the digests of the files hashed last are kept
DIGEST_MIN_BYTES = 1 << 20  # a smaller file is hashed in microseconds: its digest is not remembered


@dataclass
class Corpus:
    """Three token streams over one vocabulary: ``train``, ``valid``, ``test`` are (N,) LongTensors.

    ``unk_mapped[split]`` is how many tokens of that split were outside the vocabulary and were
    read as ``<unk>`` (characters: as U+FFFD).
    """

    name: str
    level: str
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor
    vocab: Vocab
    unk_mapped: dict = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s} {len(getattr(self, s)):,}" for s in SPLITS)
        mapped = sum(self.unk_mapped.values())
        unk = UNK if self.level == "word" else "U+FFFD"
        note = f"; {mapped:,} tokens read as {unk} ({self._mapped_by_split()})" if mapped else ""
        return f"Corpus({self.name!r}, {self.level} level: {sizes} tokens; vocabulary {len(self.vocab):,}{note})"

    def _mapped_by_split(self) -> str:
        return ", ".join(f"{s} {self.unk_mapped.get(s, 0):,}" for s in SPLITS)


# ---------------------------------------------------------------------------------------------
# Finding the text


def _unknown(name) -> CorpusError:
    names = ", ".join(repr(n) for n in NAMES)
    return CorpusError(f"Unknown corpus {name!r}: use one of {names}, or give the path of a folder "
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


def _read(path: Path, empty: str = "every split needs some text") -> str:
    """The text of a UTF-8 file (a byte-order mark dropped; ``\\r\\n`` and ``\\r`` read as ``\\n``);
    ``empty`` is what the error for an empty file asks for."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path} is not UTF-8 text (byte {err.start} is {err.object[err.start:err.start + 1]!r}): "
                          "save it as UTF-8.") from None
    except OSError as err:
        raise CorpusError(f"{path} cannot be read ({err.strerror or err}): check that it exists and that "
                          "you may read it.") from None
    if not text:
        raise CorpusError(f"{path} is empty: {empty}.")
    return text


def _a_loop_or_a_dangling_link(path: Path) -> Optional[CorpusError]:
    """The error for a symbolic link that cannot be followed (a loop, or a target that is gone), else None."""
    if path.is_symlink() and not path.exists():
        try:
            path.resolve(strict=True)
            why = "leads nowhere"
        except RuntimeError:  # Python < 3.13 reports a loop so
            why = "is a loop of symbolic links"
        except OSError as err:
            why = "is a loop of symbolic links" if err.errno == errno.ELOOP else "points to a file that does not exist"
        return CorpusError(f"{path} {why}: replace it with the file itself or a link to an existing one.")
    return None


def _special(path: Path) -> Optional[str]:
    """What ``path`` is when it exists but is neither a folder nor a regular file (a FIFO, a device, a socket)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
             (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), None)


def _refuse_unreadable(path: Path, fix: str) -> None:
    """Refuse ``path`` in one sentence when it is a loop of links, a dangling link, a folder, or a FIFO, a
    device or a socket (reading one would wait forever or never end); ``fix`` says what to do instead."""
    broken = _a_loop_or_a_dangling_link(path)
    if broken is not None:
        raise broken
    if path.is_dir():
        raise CorpusError(f"{path} is a folder, not a text file: {fix}")
    special = _special(path)
    if special:
        raise CorpusError(f"{path} is {special}, not a text file: {fix}")


def _split_files(folder: Path) -> list[Path]:
    for split in SPLITS:
        path = folder / f"{split}.txt"
        _refuse_unreadable(path, "a corpus folder needs the files train.txt, valid.txt and test.txt.")
        if not path.is_file():
            raise CorpusError(f"The folder {folder} has no {split}.txt: a corpus folder needs train.txt, "
                              "valid.txt and test.txt.")
    return [folder / f"{s}.txt" for s in SPLITS]


def _line_start_at_or_after(text: str, k: int) -> int:
    """The first position >= k where a line begins (0, or just after a newline)."""
    if k <= 0:
        return 0
    j = text.find("\n", k - 1)
    return len(text) if j < 0 else j + 1


def split_one_file(text: str) -> list[str]:
    """A corpus of one file (Tiny Shakespeare, which has no official split): train / valid / test = the
    first 90%, next 5%, last 5%.

    The split is by characters, as Hugging Face / TFDS ``tiny_shakespeare`` do (nanoGPT uses 90 / 10),
    with each cut moved forward to the next line start so that every split begins a line.
    """
    n = len(text)
    a, b = (_line_start_at_or_after(text, int(f * n)) for f in ONE_FILE_CUTS)
    return [text[:a], text[a:b], text[b:]]


def _locate(name, data_dir) -> tuple[str, list[Path], Optional[Path]]:
    """(label, the text files: three splits or Tiny Shakespeare's one, the vocab.txt to use or None)."""
    if data_dir is not None and Path(data_dir).exists() and not Path(data_dir).is_dir():
        raise CorpusError(f"data_dir={data_dir} is a file, not a folder: give the folder that holds ptb/, "
                          "wikitext-2/ or tinyshakespeare/.")
    if isinstance(name, str) and not name.strip():
        raise _unknown(name)
    if name is None or name == config.EMBEDDED:
        folder = Path(embedded.ensure() if data_dir is None else embedded.ensure(Path(data_dir) / config.EMBEDDED))
        return config.EMBEDDED, _split_files(folder), folder / "vocab.txt"
    if isinstance(name, str) and name in download.SOURCES:
        folder = _real_folder(name, data_dir)
        return name, [folder / f for f in download.SOURCES[name]], None
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"The corpus name must be a string or a folder path, got {type(name).__name__}.")
    folder = Path(name)
    broken = _a_loop_or_a_dangling_link(folder)
    if broken is not None:
        raise broken
    if folder.is_file():
        raise CorpusError(f"{folder} is a file, not a folder: give the folder holding train.txt, valid.txt "
                          "and test.txt.")
    if not folder.is_dir():
        if isinstance(name, str) and os.sep not in name and "/" not in name:
            raise _unknown(name)
        raise CorpusError(f"The folder {folder} does not exist: give a folder holding train.txt, valid.txt "
                          f"and test.txt, or one of the names {', '.join(NAMES)}.")
    return folder.name, _split_files(folder), _vocab_file(folder / "vocab.txt")


def _vocab_file(vocab: Path) -> Optional[Path]:
    """``vocab`` when the folder has one, None when it has none; a vocab.txt that cannot be a list is refused."""
    _refuse_unreadable(vocab, "put one token a line in a file vocab.txt, or remove the folder to build the "
                              "vocabulary from train.txt.")
    return vocab if vocab.exists() else None


def _texts(files: list[Path]) -> list[str]:
    if len(files) == 1:
        return split_one_file(_read(files[0]))
    return [_read(f) for f in files]


# ---------------------------------------------------------------------------------------------
# The token cache: encoding WikiText-2 takes about a second, reading its ids back a few ms.


def file_digests(paths: list[Path], remember: bool = True) -> dict:
    """``{path: (size, sha256 of its bytes)}`` for each file, hashed only when the file is new or changed.

    The digests of files of 1 MB or more are remembered in the cache folder (:data:`DIGESTS`), each under the
    file's identity: its path, size, modification and change times (ns), inode and device. Any write to a file
    changes its change time, which no program can set back (``touch -r`` restores only the modification time),
    so an edit is always hashed again, and an unchanged corpus costs a ``stat`` per file. A smaller file is
    hashed every time (microseconds), as is every file without ``remember`` or where the cache folder cannot be
    used (about 8 ms for WikiText-2's 13 MB).
    """
    paths = [Path(p) for p in paths]
    infos = {path: path.stat() for path in paths}  # taken before hashing: a write while a file is read changes it
    store, known = None, {}
    if remember and any(info.st_size >= DIGEST_MIN_BYTES for info in infos.values()):
        try:
            store = config.cache_dir() / DIGESTS
            known = json.loads(store.read_text(encoding="utf-8"))
        except ConfigError:  # no cache folder: every file is hashed
            store = None
        except (OSError, ValueError):  # none yet, or a damaged one: written afresh
            known = {}
    known = known if isinstance(known, dict) else {}
    out, changed = {}, False
    for path, info in infos.items():
        identity = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]
        name = str(path.resolve())
        entry = known.get(name) if info.st_size >= DIGEST_MIN_BYTES else None
        if isinstance(entry, dict) and entry.get("id") == identity and isinstance(entry.get("sha256"), str):
            sha = entry["sha256"]
        else:
            sha = download.sha256_of(path)
            if store is not None and info.st_size >= DIGEST_MIN_BYTES:
                known.pop(name, None)
                known[name] = {"id": identity, "sha256": sha}
                changed = True
        out[path] = (info.st_size, sha)
    if changed and store is not None:
        kept = dict(list(known.items())[-DIGESTS_KEPT:])  # the files hashed last
        try:
            atomic_write(store, json.dumps(kept, indent=0), durable=False)  # a cache: rebuilt if ever lost
        except OSError:
            pass
    return out


def source_fingerprint(files: list[Path], vocab_file: Optional[Path], level: str, min_count: int,
                       remember: bool = True) -> str:
    """The fingerprint of everything a corpus's streams are computed from: the size and sha256 of every file read
    (all three splits, or Tiny Shakespeare's one file with its cuts; the ``vocab.txt`` used as the vocabulary; for
    a generated embedded corpus, its ``params.json``: the generator's parameters and format version), the level and
    ``min_count``. Files are named by their names alone, so the fingerprint is the same on every machine. It is
    part of a stored run's key (:func:`lmcourse.store.stored_runs.corpus_fingerprint`), so a run made on an
    earlier version of any of these files is never loaded as this one's. ``remember``: see :func:`file_digests`."""
    read = list(files) + ([vocab_file] if vocab_file is not None and level == "word" else [])
    folder = Path(files[0]).parent
    if len(files) == len(SPLITS) and (folder / "checksums.json").is_file() and (folder / "params.json").is_file():
        read.append(folder / "params.json")  # the embedded corpus: what it was generated from
    digests = file_digests(read, remember)
    parts = {"level": level, "min_count": min_count, "files": {Path(p).name: list(digests[Path(p)]) for p in read}}
    if len(files) == 1:
        parts["cuts"] = list(ONE_FILE_CUTS)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _cache_key(level: str, files: list[Path], min_count: int) -> Optional[str]:
    """The sha256 of what the ids are made from: the files' bytes, the level and ``min_count``;
    None for small corpora (not cached).

    The key is the files' content (:func:`file_digests`), not their size and modification time, so an edit
    restored with ``touch -r`` is still seen.
    """
    if sum(f.stat().st_size for f in files) < CACHE_MIN_BYTES:
        return None
    hashes = [sha for _, sha in file_digests(files).values()]  # only called with the cache on
    return hashlib.sha256(json.dumps([CACHE_FORMAT, level, min_count, hashes]).encode()).hexdigest()


def _cache_path(label: str, level: str, key: str) -> Path:
    """Where the ids of the source with sha256 ``key`` are cached."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label)
    return config.cache_dir() / "tokens" / f"{safe}-{level}-{key[:16]}.pt"


def _load_cached(path: Path, key: str):
    """The cached ``(streams, vocab, unk_mapped)``, or None when the file is missing, damaged (its
    checksum does not match its contents) or made from another source (another ``key``)."""
    try:
        saved = torch.load(path, weights_only=True)
        if not (verify(saved) and saved.get("source") == key):
            return None
        streams, vocab, mapped = [saved[s] for s in SPLITS], Vocab(saved["itos"]), saved["unk_mapped"]
    except Exception:  # a missing or damaged cache is simply rebuilt
        return None
    if all(t.dtype == torch.long and t.dim() == 1 for t in streams) and set(mapped) == set(SPLITS):
        return streams, vocab, {s: int(mapped[s]) for s in SPLITS}
    return None


def _save_cached(path: Path, key: str, streams: list[torch.Tensor], vocab: Vocab, mapped: dict) -> None:
    """Write atomically, sealed with its checksum and the ``key`` of its source; replace older caches of
    the same corpus; skip silently where nothing can be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = seal({"source": key, "itos": vocab.itos, "unk_mapped": mapped, **dict(zip(SPLITS, streams))})
        atomic_write(path, lambda f: torch.save(payload, f), durable=False)  # a cache: rebuilt if ever lost
        for old in path.parent.glob(path.name.rsplit("-", 1)[0] + "-*.pt"):
            if old != path:
                old.unlink(missing_ok=True)
    except (OSError, RuntimeError):
        pass


# ---------------------------------------------------------------------------------------------
# Text to ids


def words_of(text: str) -> list[str]:
    """The word stream of a text: ``line.split() + ['<eos>']`` for every line, as one flat list."""
    if not text.endswith("\n"):
        text += "\n"  # a last line without its newline still ends with <eos>
    return text.replace("\n", f" {EOS} ").split()


def _encode_words(streams: list[list[str]], itos: list[str], vocab_file: Optional[Path]
                  ) -> tuple[list[torch.Tensor], dict]:
    """Ids of every split and how many words of each were outside ``itos`` (read as ``<unk>``).

    With a ``vocab_file`` a word outside it is an error instead.
    """
    stoi = {s: i for i, s in enumerate(itos)}
    out, mapped = [], {}
    for split, words in zip(SPLITS, streams):
        ids = np.fromiter(map(stoi.get, words, repeat(-1)), dtype=np.int64, count=len(words))  # (N,)
        outside = ids < 0  # (N,)
        if vocab_file is not None and outside.any():
            word = words[int(np.argmax(outside))]
            raise CorpusError(f"The word {word!r} of {split}.txt is not in {vocab_file}: regenerate the corpus, "
                              "or delete vocab.txt to build the vocabulary from train.txt.")
        mapped[split] = int(outside.sum())
        if mapped[split]:
            ids[outside] = stoi[UNK]
        out.append(torch.from_numpy(ids))
    return out, mapped


def train_vocabulary(train_words: list[str], min_count: int = 1) -> list[str]:
    """The word types of the training stream in order of first appearance, kept when seen at least
    ``min_count`` times (``<eos>`` and ``<unk>`` always), with ``<unk>`` appended when absent."""
    counts = Counter(train_words)
    itos = [w for w in counts if counts[w] >= min_count or w in (EOS, UNK)]  # Counter keeps first-seen order
    return itos if UNK in counts else itos + [UNK]


def _vocab_file_itos(vocab_file: Path) -> list[str]:
    itos = [t for t in _read(vocab_file, "list one token a line, or delete it to build the vocabulary "
                                        "from train.txt").split("\n") if t.strip()]
    if not itos:
        raise CorpusError(f"{vocab_file} holds only blank lines: list one token a line, or delete it to build "
                          "the vocabulary from train.txt.")
    repeated = [t for t, n in Counter(itos).items() if n > 1]
    if repeated:
        raise CorpusError(f"{vocab_file} lists the token {repeated[0]!r} more than once: give each token one line.")
    return itos


def _check_words(streams: list[list[str]], files: list[Path]) -> None:
    """Refuse a split whose lines are all blank: it would score nothing but ``<eos>``, or make every word ``<unk>``."""
    for i, (split, words) in enumerate(zip(SPLITS, streams)):
        if all(w == EOS for w in words):
            where = str(files[i]) if len(files) == len(SPLITS) else f"The {split} part of {files[0]}"
            raise CorpusError(f"{where} has no words, only blank lines: every split needs some text.")


def _word_corpus(texts: list[str], vocab_file: Optional[Path], min_count: int, files: list[Path]):
    """(ids of each split, Vocab, tokens read as <unk> per split); see the module docstring for the vocabulary."""
    streams = [words_of(t) for t in texts]
    _check_words(streams, files)
    if vocab_file is not None and min_count != 1:
        raise CorpusError(f"min_count={min_count} needs a vocabulary built from train.txt, but this corpus comes "
                          f"with {vocab_file}: leave min_count at 1.")
    itos = _vocab_file_itos(vocab_file) if vocab_file is not None else train_vocabulary(streams[0], min_count)
    ids, mapped = _encode_words(streams, itos, vocab_file)
    return ids, Vocab(itos), mapped


def _char_corpus(texts: list[str]):
    """Character ids over the sorted characters of train (plus U+FFFD for unseen ones), and their count per split."""
    codes = [np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32).astype(np.int64) for t in texts]  # code points
    size = max(int(max(c.max() for c in codes)), ord(UNSEEN_CHAR)) + 1
    present = np.zeros(size, dtype=bool)
    present[codes[0]] = True  # the characters of train
    outside = [~present[c] for c in codes]  # (N,) per split
    mapped = {s: int(o.sum()) for s, o in zip(SPLITS, outside)}
    if any(mapped.values()):
        present[ord(UNSEEN_CHAR)] = True
        codes = [np.where(o, ord(UNSEEN_CHAR), c) for c, o in zip(codes, outside)]
    points = np.flatnonzero(present)  # sorted code points = sorted characters
    lookup = np.zeros(size, dtype=np.int64)
    lookup[points] = np.arange(len(points))
    return [torch.from_numpy(lookup[c]) for c in codes], Vocab([chr(p) for p in points]), mapped


def load_corpus(name=None, level: str = "word", data_dir=None, cache: bool = True, min_count: int = 1) -> Corpus:
    """Load a corpus as three token streams.

    ``name``: ``None`` or ``"embedded"`` (the generated corpus, offline), ``"ptb"``, ``"wikitext-2"``,
    ``"tinyshakespeare"`` (split 90 / 5 / 5 by characters, see :func:`split_one_file`), or a
    folder holding ``train.txt``, ``valid.txt``, ``test.txt`` (and optionally ``vocab.txt``, one
    token a line, used as the word vocabulary in that order). Real corpora are looked for as
    ``<data_dir>/<name>/`` (default :func:`lmcourse.config.data_dir`, then the cache folder) and
    downloaded, sha256-verified, when absent. ``level``: ``"word"`` or ``"char"``. The vocabulary
    comes from train alone; words seen fewer than ``min_count`` times in train, and words of valid
    and test unseen in train, are read as ``<unk>`` and counted in ``Corpus.unk_mapped`` (see the
    module docstring). With ``cache``, the ids of a corpus of 1 MB or more are kept under the cache
    folder, keyed by the sha256 of the files, and read back (``weights_only``) while the bytes are
    unchanged. The vocabulary's ``source`` is :func:`source_fingerprint` of the files read.
    """
    if level not in LEVELS:
        raise ValueError(f"level={level!r} is not a level: use 'word' or 'char'.")
    min_count = check_int(min_count, "min_count", 1)
    if level == "char" and min_count != 1:
        raise ValueError(f"min_count={min_count} applies to words: leave it at 1 for level='char'.")
    label, files, vocab_file = _locate(name, data_dir)
    keyed = files + ([vocab_file] if vocab_file and level == "word" else [])
    key = _cache_key(level, keyed, min_count) if cache else None
    path = _cache_path(label, level, key) if key is not None else None
    cached = _load_cached(path, key) if path is not None else None
    if cached is None:
        texts = _texts(files)
        cached = _char_corpus(texts) if level == "char" else _word_corpus(texts, vocab_file, min_count, files)
        if path is not None:
            _save_cached(path, key, *cached)
    streams, vocab, mapped = cached
    vocab.source = source_fingerprint(files, vocab_file, level, min_count, remember=cache)  # part of a run's key
    return Corpus(label, level, *streams, vocab, mapped)


def rare_words_note(corpus: Corpus, min_count: int) -> Optional[str]:
    """The sentence saying how much of the text ``min_count`` read as ``<unk>`` (None at 1): a perplexity over a
    vocabulary cut that far is not comparable with the full one's, and near 1 when almost every token is ``<unk>``."""
    if min_count <= 1 or corpus.level != "word":
        return None
    share = {s: corpus.unk_mapped.get(s, 0) / max(1, len(getattr(corpus, s))) for s in SPLITS}
    note = (f"note: --min-count {min_count} read {share['train']:.1%} of the training tokens and {share['valid']:.1%} "
            f"of the validation tokens as {UNK}, leaving a vocabulary of {len(corpus.vocab):,} words")
    if share["train"] >= 0.5:
        return note + (f"; the perplexities below mostly measure how well {UNK} is predicted, not the text, so lower "
                       "--min-count.")
    return note + "; its perplexities are not comparable with the full vocabulary's."


# ---------------------------------------------------------------------------------------------
# Batching


def _check_int(value, what: str, low: int = 1) -> int:
    return check_int(value, what, low)


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
    check_number(p, "p", 0.0, 1.0)
    check_number(sigma, "sigma", 0.0)
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
