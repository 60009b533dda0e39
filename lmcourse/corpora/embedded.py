"""The embedded corpus: a PTB-like text written by a seeded probabilistic program.

It needs no network, is the default dataset of every lesson, and is built so that each lesson's
phenomenon shows (see :mod:`lmcourse.corpora.grammar` for the story and its knobs). Because the program
is known, :class:`lmcourse.corpora.oracle.Oracle` scores any text exactly under it: the floor line on
every perplexity plot.

Generation is vectorised: all sentences of a split advance one position at a time together, and
names and lookups are filled in afterwards with array operations. The same seed gives the same
bytes on any machine, since every draw is an integer draw from integer weights.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..checksum import atomic_write, new_folder_mode
from ..errors import NoSpaceError, WriteError
from .grammar import (
    CAT,
    NAME_LIST,
    NOUN_CATS,
    WEIGHT_UNIT,
    VERB_CATS,
    WORD_LIST,
    Grammar,
    Lexicon,
    Params,
    build_grammar,
    build_lexicon,
    preference_mass,
)
from ..config import cache_dir

FORMAT = 6  # bump when the story or its word lists change, so stale caches and stored runs are left alone
NAME_SLOT, VALUE_SLOT = -1, -2
TOPICS_FILE = Path(__file__).with_name("topics.py")


class Sampler:
    """Integer-weight categorical draws for many rows at once, each row with its own table."""

    def __init__(self, weights: np.ndarray):  # (R, N) int64 rows of weights
        self.cum = np.cumsum(weights, axis=1)           # (R, N)
        self.total = self.cum[:, -1]
        flat = self.cum + np.concatenate([[0], np.cumsum(self.total)[:-1]])[:, None]
        self.flat, self.base, self.width = flat.ravel(), flat[:, 0] - self.cum[:, 0], weights.shape[1]

    def draw(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One draw from each of the given rows' distributions -> column indices."""
        out = np.full(len(rows), -1)
        ok = self.total[rows] > 0                                     # empty rows (names, values) give -1
        u = rng.integers(0, self.total[rows[ok]]) + self.base[rows[ok]]
        out[ok] = np.searchsorted(self.flat, u, side="right") - rows[ok] * self.width
        return out


def _sentences(lex: Lexicon, gram: Grammar, params: Params, topic: np.ndarray, rng) -> tuple[np.ndarray, np.ndarray]:
    """Run the sentence automaton for every row at once -> (tokens (B, L) padded with -3, lengths)."""
    K, C = gram.emit.shape[1], len(CAT)
    sym_draw = Sampler(gram.emit.reshape(-1, gram.emit.shape[2]))     # rows: state * K + topic
    weights = gram.word_weights(lex)                                  # (L, K, V)
    word_rows = np.zeros((len(weights) * K * C, len(lex.words)), dtype=np.int64)
    for c in range(C):                                                # rows: (context * K + topic) * C + category
        word_rows[np.arange(len(weights) * K) * C + c] = np.where(lex.cat == c, weights, 0).reshape(-1, len(lex.words))
    word_draw = Sampler(word_rows)
    prefer = _Preference(lex, params, gram)
    B = len(topic)
    state, verb = np.full(B, gram.start), np.zeros(B, dtype=np.int64)
    active = np.ones(B, dtype=bool)
    columns = []
    while active.any():
        rows = np.flatnonzero(active)
        sym = sym_draw.draw(state[rows] * K + topic[rows], rng)
        c = np.where(sym < C, sym, lex.cat[gram.literal[sym]])              # the word's category
        w = np.full(B, -3)
        w[rows] = np.where(sym < C, word_draw.draw((gram.context[state[rows]] * K + topic[rows]) * C
                                                   + np.minimum(sym, C - 1), rng), gram.literal[sym])
        w[rows[c == CAT["NAME"]]] = NAME_SLOT
        w[rows[c == CAT["VALUE"]]] = VALUE_SLOT
        obj = gram.object_noun[state[rows]] & np.isin(c, NOUN_CATS)
        w[rows[obj]] = prefer.apply(w[rows[obj]], c[obj], topic[rows[obj]], verb[rows[obj]],
                                    gram.context[state[rows[obj]]], rng)
        is_verb = np.isin(c, VERB_CATS)
        verb[rows[is_verb]] = lex.lemma[w[rows[is_verb]]]
        columns.append(w)
        state[rows] = gram.delta[state[rows], sym]
        active[rows[c == CAT["EOS"]]] = False
    tokens = np.stack(columns, axis=1)
    return tokens, (tokens != -3).sum(1)


class _Preference:
    """Object nouns after verb v: with probability q = (beta-1) S / (1 + (beta-1) S) redraw from v's
    preferred nouns (weighted by topic, among those the state's context allows), which gives exactly
    the distribution in grammar.preference_mass."""

    def __init__(self, lex: Lexicon, params: Params, gram: Grammar):
        self.lex, self.beta = lex, params.preference
        self.S = preference_mass(lex, gram.factor)                             # (L, K, n_verbs)
        sg = gram.factor[:, None, lex.noun_ids[0]] * lex.topic_weight[None, :, lex.noun_ids[0]]  # (L, K, n_nouns)
        self.K, self.n_verbs = sg.shape[1], lex.prefer.shape[0]
        self.draw_pref = Sampler(sg[:, :, lex.prefer].reshape(-1, lex.prefer.shape[1]))  # rows (ctx K + z) n_verbs + v

    def apply(self, w, c, z, v, ctx, rng):
        S = self.S[ctx, z, v]
        q = (self.beta - 1) * S / (1 + (self.beta - 1) * S)
        redraw = rng.random(len(w)) < q
        col = self.draw_pref.draw((ctx * self.K + z) * self.n_verbs + v, rng)
        lemma = self.lex.prefer[v, col]
        form = self.lex.noun_ids[(c == CAT["NOUN_PL"]).astype(int), lemma]
        return np.where(redraw, form, w)


def _fill_names(stream: np.ndarray, doc: np.ndarray, lex: Lexicon, params: Params, rng) -> None:
    """Chinese-restaurant names per document: slot j is new with probability alpha / (j + alpha),
    drawn from the base distribution G; otherwise it copies a uniformly chosen earlier slot."""
    slots = np.flatnonzero(stream == NAME_SLOT)
    if len(slots) == 0:
        return
    d = doc[slots]
    first = np.searchsorted(d, d, side="left")                       # index of the doc's first slot
    j = np.arange(len(slots)) - first                                # slots before this one in its doc
    new = rng.random(len(slots)) < params.name_alpha / (j + params.name_alpha)
    ptr = np.where(new, np.arange(len(slots)), first + rng.integers(0, np.maximum(j, 1)))
    while True:                                                      # resolve copy chains
        nxt = ptr[ptr]
        if np.array_equal(nxt, ptr):
            break
        ptr = nxt
    base = Sampler(np.rint(lex.name_base[None, :] * WEIGHT_UNIT).astype(np.int64))
    fresh = base.draw(np.zeros(len(slots), dtype=np.int64), rng)
    stream[slots] = fresh[ptr]


def _fill_values(stream: np.ndarray, lex: Lexicon, rng) -> None:
    """Each value follows its key: value ~ p(. | key), a row of the high-rank lookup table."""
    slots = np.flatnonzero(stream == VALUE_SLOT)
    if len(slots):
        keys = lex.key_index[stream[slots - 1]]
        stream[slots] = lex.value_ids[Sampler(lex.lookup).draw(keys, rng)]


def generate_split(lex: Lexicon, gram: Grammar, params: Params, n_tokens: int, split: int) -> list[np.ndarray]:
    """About ``n_tokens`` tokens (``<eos>`` included) as a list of lines of word ids."""
    for attempt in range(8):  # each attempt draws twice as many lines, from its own seed
        rng = np.random.default_rng([params.seed, 100 + split, attempt])
        lines = _draw_lines(lex, gram, params, int(n_tokens / 12 * 2 ** attempt) + 10, rng)
        if sum(len(x) for x in lines) >= n_tokens:
            break
    size = np.cumsum([len(x) for x in lines])
    lines = lines[: int(np.searchsorted(size, n_tokens)) + 1]
    stream = np.concatenate(lines)
    lengths = [len(x) for x in lines]
    line_doc = np.repeat(np.cumsum([x[0] == CAT_DOC_ID for x in lines]) - 1, lengths)
    _fill_names(stream, line_doc, lex, params, rng)
    _fill_values(stream, lex, rng)
    return np.split(stream, np.cumsum(lengths)[:-1])


def _draw_lines(lex: Lexicon, gram: Grammar, params: Params, n_lines: int, rng) -> list[np.ndarray]:
    """Document markers and sentences (names and values still as slots)."""
    is_doc = rng.integers(0, WEIGHT_UNIT, size=n_lines) < gram.doc_weight
    is_doc[0] = True
    doc = np.cumsum(is_doc) - 1                                      # (lines,) document of each line
    topic = rng.integers(0, params.n_topics, size=doc[-1] + 1)[doc]
    body, lengths = _sentences(lex, gram, params, topic[~is_doc], rng)
    doc_line, sentences = np.array([CAT_DOC_ID, EOS_ID]), iter([row[:n] for row, n in zip(body, lengths)])
    return [doc_line if d else next(sentences) for d in is_doc]


EOS_ID, CAT_DOC_ID = 0, 1  # the lexicon lists <eos> and <doc> first


def _key(params: Params) -> str:
    """The cache folder's name: the format, the parameters and the word lists the corpus is made of."""
    lists = hashlib.sha256(b"".join(f.read_bytes() for f in (WORD_LIST, NAME_LIST, TOPICS_FILE))).hexdigest()
    blob = json.dumps({"format": FORMAT, "lists": lists, **asdict(params)}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:10]


FILES = ("train.txt", "valid.txt", "test.txt", "vocab.txt")
CHECKSUMS = "checksums.json"  # the sha256 of each of FILES, written with them


def _checksums(folder: Path) -> dict:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in FILES}


def intact(folder: Path) -> bool:
    """True when ``folder`` holds the corpus files with the checksums written beside them."""
    try:
        return json.loads((folder / CHECKSUMS).read_text()) == _checksums(folder)
    except (OSError, ValueError):
        return False


def write_corpus(folder: Path, params: Params = Params()) -> Path:
    """Generate the three splits and the vocabulary into ``folder`` (atomically), with their checksums."""
    lex = build_lexicon(params)
    gram = build_grammar(params, lex)
    assert lex.words[EOS_ID] == "<eos>" and lex.words[CAT_DOC_ID] == "<doc>"
    words = np.array(lex.words, dtype=object)
    files = {}
    for i, (split, n) in enumerate((("train", params.train_tokens), ("valid", params.valid_tokens),
                                    ("test", params.test_tokens))):
        lines = generate_split(lex, gram, params, n, i)
        files[f"{split}.txt"] = ("\n".join(" ".join(words[line[:-1]]) for line in lines) + "\n").encode("utf-8")
    files["vocab.txt"] = ("\n".join(lex.words) + "\n").encode("utf-8")
    files["params.json"] = json.dumps({"format": FORMAT, **asdict(params)}, indent=1).encode("utf-8")
    folder = Path(folder)
    try:
        _write_files(folder, files)
    except OSError as err:
        raise _write_failed(folder, err, sum(map(len, files.values()))) from None
    return folder


def _write_files(folder: Path, files: dict) -> None:
    """Write ``files`` (name -> bytes) and their checksums into a temporary folder, then swap it in (the folder
    made with the user's umask, each file through the package's one atomic write)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".tmp"))
    try:
        os.chmod(tmp, new_folder_mode())  # mkdtemp's 0700 would hide the corpus from the user's group
        for name, data in files.items():
            atomic_write(tmp / name, data, durable=False)  # a cache: generated again if ever lost
        atomic_write(tmp / CHECKSUMS, json.dumps(_checksums(tmp), indent=1), durable=False)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_failed(folder: Path, err: OSError, needed: int) -> Exception:
    """One sentence for a write of the corpus that failed: where, and how much it needed on a full disk."""
    mb = needed / 1e6
    if isinstance(err, NoSpaceError) or err.errno in (errno.ENOSPC, errno.EDQUOT):
        return NoSpaceError(f"No space left on the disk of {folder.parent} to write the embedded corpus (needed "
                            f"about {mb:.0f} MB): free some space, or set LMCOURSE_CACHE to a folder on another disk.")
    why = getattr(err, "reason", None) or err.strerror or type(err).__name__
    return WriteError(f"The embedded corpus cannot be written to {folder} ({why}): set "
                      "LMCOURSE_CACHE to a folder you may write to.")


def ensure(folder: Path | None = None, params: Params = Params()) -> Path:
    """The folder holding the embedded corpus for ``params``, generated on first use and cached.

    A folder whose files do not match the checksums written with them (damaged, edited, or left
    half-written) is generated again: the same seed gives the same bytes.
    """
    if folder is None:
        folder = cache_dir() / f"embedded-{params.seed}-{_key(params)}"
    folder = Path(folder)
    if not intact(folder):
        write_corpus(folder, params)
    return folder


def load_params(folder: Path) -> Params:
    """The parameters a cached corpus folder was generated with."""
    meta = json.loads((Path(folder) / "params.json").read_text())
    meta.pop("format", None)
    return Params(**meta)
