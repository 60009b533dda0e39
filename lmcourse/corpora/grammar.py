"""The tables of the embedded corpus's probabilistic program: its lexicon and its grammar.

The corpus is written by a small generative story (see :mod:`lmcourse.corpora.embedded`), and the oracle
(:mod:`lmcourse.corpora.oracle`) scores text under the same story. Both read the tables built here.

The words are real English. A hand-written core of a few hundred lemmas in six topics (business,
politics, sport, science, arts, weather; :mod:`lmcourse.corpora.topics`) comes first; the long
tail follows in order of real frequency. Both take their inflected forms from the derived list
``english.tsv``, and the names come from the US census lists in ``names.tsv`` (their sources and
licences are in the lists' headers and in :mod:`lmcourse.corpora.derive_words`).

The story, and which knob makes which phenomenon:

- **Local syntax** (what an n-gram sees): a sentence grammar written as a deterministic
  finite automaton over word *categories* (determiner, adjective, singular noun, ...) and, inside
  fixed expressions, single words (see :class:`Grammar`). Every word type belongs to exactly one
  category, so the automaton's state is a function of the words read.
  Knobs: the emission weights in :func:`build_grammar` and the per-topic ``style``.
- **Fixed expressions** (what a trigram and a 4-gram add over a bigram): time adverbials ("at the
  end of the year", "in the third quarter", "N years ago") at the start of a sentence or after
  the object, links ("as well as", "according to") before a noun phrase, and amounts ("$ N
  million", "N cents a share", "one of the") inside noun phrases. Their words are spelt out by
  states of their own, so the word two or three back decides the next one where the last word
  (a "the", an "N") does not. Knob: ``Params.phrase_rate`` (0 turns them off); the tables
  ``ADVERBIALS``, ``LINKS``, ``AMOUNTS`` and their ``CHOICES``.
- **Word-level collocations**: each verb prefers a few object nouns ("raise" the rate or the
  price, "paint" a portrait), which follow it two to four words later, in the main clause and in
  a relative clause; a subject prefers agent nouns ("the bank", "the coach", "the storm").
  Knobs: ``Params.preference`` (how strongly) and ``Params.n_preferred`` (how many nouns per
  verb, named in ``topics.py``), ``Params.agent_boost``.
- **Long-range agreement**: a subject's number (singular/plural) must agree with its verb, with a
  prepositional phrase (holding an "attractor" noun of any number), a relative clause and a
  parenthesis allowed in between. Knobs: ``style["pp"]``, ``style["rel"]``, ``style["paren"]``.
- **Paired delimiters**: a parenthesis ``-lrb- ... -rrb-`` opens after the subject and must close
  before the verb, possibly more than five words later. Knob: ``style["paren"]``.
- **Rare names that recur inside a document**: name slots draw from a Chinese-restaurant process
  per document (its base distribution: census surnames and first names, common ones first), so
  a name seen once in a document is likely to come back. Knob:
  ``Params.name_alpha`` (smaller = more repetition) and ``Params.n_names``.
- **Topic and style shifts between documents**: each document (opened by a ``<doc>`` line) draws a
  topic that reweights nouns, verbs, adjectives and adverbs towards its own words and sets the
  sentence style. Knobs: ``Params.n_topics``, ``Params.topic_boost``, ``Params.off_topic``.
- **High-rank next-word choices** (for the softmax bottleneck): a "lookup" construction in an
  object, an opening ("imports of"), a key word (a place: "italian", "texas") and a value word (a
  product: "wine", "cars") drawn from ``softmax(sharpness * A[key])`` with a random Gaussian
  matrix ``A``. Its log-probability matrix has rank ``min(n_keys, n_values)`` whenever
  ``sharpness > 0``. Knobs: ``Params.lookup_rate``, ``Params.lookup_sharpness``, ``Params.n_keys``.

All probabilities are stored as integer weights (probability = weight / row total), so the same
seed gives the same bytes on any machine and the oracle uses exactly the generator's numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .topics import GENERAL, KEYS, TOPICS, VALUES

WEIGHT_UNIT = 1 << 30  # the integer weight that stands for probability 1 (the weights' resolution)

CATEGORIES = (
    "EOS", "DOC", "ADV_S", "DET", "DET_SG", "DET_PL", "PRON_SG", "PRON_PL", "NAME", "UNK",
    "ADJ", "NOUN_SG", "NOUN_PL", "PREP", "REL", "VERB_SG", "VERB_PL", "VERB_PAST",
    "LRB", "RRB", "NUM", "UNIT", "KEY", "VALUE", "ADV", "CONJ", "FIXED",
)
CAT = {c: i for i, c in enumerate(CATEGORIES)}

# Closed classes: word -> relative weight inside its category.
FUNCTION_WORDS = {
    "EOS": {"<eos>": 1}, "DOC": {"<doc>": 1}, "UNK": {"<unk>": 1}, "NUM": {"N": 1},
    "LRB": {"-lrb-": 1}, "RRB": {"-rrb-": 1},
    "ADV_S": {"meanwhile": 5, "however": 6, "yesterday": 4, "today": 3, "still": 2, "also": 3, "now": 3,
              "separately": 2, "earlier": 2, "indeed": 1},
    "DET": {"the": 60, "its": 8, "their": 6, "his": 3, "her": 2, "our": 2},
    "DET_SG": {"a": 30, "an": 5, "this": 6, "each": 3, "every": 2, "another": 3},  # a, an: see ARTICLES
    "DET_PL": {"these": 4, "those": 3, "many": 5, "several": 4, "some": 6},
    "PRON_SG": {"he": 6, "she": 4, "it": 8},
    "PRON_PL": {"they": 8, "we": 3},
    "PREP": {"of": 30, "in": 20, "for": 10, "on": 8, "with": 7, "at": 5, "from": 6, "by": 5, "about": 4,
             "under": 2, "after": 3},
    "REL": {"that": 6, "which": 4, "who": 3},
    "UNIT": {"million": 8, "billion": 4, "percent": 8, "points": 3, "shares": 4, "years": 3},
    "CONJ": {"and": 10, "but": 6, "while": 3, "because": 3, "although": 2},
    # Words that occur only inside fixed expressions (never drawn as a category).
    "FIXED": {w: 1 for w in ("$ cents share ago end same time year month months week weeks half first second "
                             "third fourth last more than one as well such according to so far other hand "
                             "result addition imports exports shipments supplies").split()},
}


@dataclass(frozen=True)
class Params:
    """The knobs of the generative story (see the module docstring for what each one makes)."""

    seed: int = 2017
    n_topics: int = 6          # at most len(topics.TOPICS); the words of topics past n_topics are general
    n_nouns: int = 1450        # lemmas; each gives a singular and a plural word
    n_verbs: int = 560         # lemmas; each gives -s, base and past forms
    n_adjs: int = 1250
    n_advs: int = 200
    n_names: int = 3600
    n_keys: int = 100
    n_values: int = 100
    zipf_a: float = 1.2       # open-class weights fall as 1 / (rank + zipf_offset) ** zipf_a
    zipf_offset: float = 8.0  # flattens the head: a topic's first few words are not far apart
    topic_boost: float = 8.0   # weight multiplier for a document's own topic words
    off_topic: float = 0.08    # weight multiplier for other topics' words
    general_share: float = 0.3  # fraction of the tail's lemmas shared by all topics
    agent_boost: int = 50      # weight multiplier of agent nouns ("bank", "coach") in a subject
    name_alpha: float = 2.0    # CRP concentration: P(new name) = alpha / (names so far + alpha)
    doc_sentences: float = 24.0  # mean sentences per document (geometric)
    preference: float = 300.0  # weight multiplier for a verb's preferred object nouns
    n_preferred: int = 4       # preferred object nouns per verb
    lookup_rate: float = 0.06  # share of objects that are a key-value lookup
    lookup_sharpness: float = 2.5  # scale of the key->value log-probability matrix
    phrase_rate: float = 1.0   # weight multiplier of the fixed expressions (0 turns them off)
    train_tokens: int = 1_000_000
    valid_tokens: int = 80_000
    test_tokens: int = 80_000


def quantise(p: np.ndarray) -> np.ndarray:
    """Non-negative float weights -> int64 weights summing to about ``WEIGHT_UNIT`` along the last axis."""
    p = np.asarray(p, dtype=np.float64)
    total = p.sum(-1, keepdims=True)
    w = np.rint(p / np.where(total > 0, total, 1) * WEIGHT_UNIT).astype(np.int64)
    return np.where(p > 0, np.maximum(w, 1), 0)


# ----------------------------------------------------------------------------- lexicon
@dataclass
class Lexicon:
    words: list[str]                 # the vocabulary, in id order
    cat: np.ndarray                  # (V,) category of each word
    lemma: np.ndarray                # (V,) lemma index inside its open class, or -1
    topic_weight: np.ndarray         # (K, V) int64: P(w | cat(w), z) as weights (0 for names, values)
    name_base: np.ndarray            # (V,) float64: the CRP base distribution G over name words
    key_index: np.ndarray            # (V,) index of a key word, or -1
    value_ids: np.ndarray            # (n_values,) word ids of the values
    lookup: np.ndarray = field(default=None)  # (n_keys, n_values) int64 weights of p(value | key)
    prefer: np.ndarray = field(default=None)  # (n_verbs, n_preferred) noun lemmas each verb prefers
    noun_ids: np.ndarray = field(default=None)  # (2, n_nouns) word ids of each noun lemma: singular, plural
    agent: np.ndarray = field(default=None)   # (V,) True for the forms of agent nouns (preferred as subjects)


def plural(w: str) -> str:
    """English spelling of -s: 'study' -> 'studies', 'box' -> 'boxes', 'bank' -> 'banks'. Every verb
    of the lexicon spells its third person singular so ('report' -> 'reports')."""
    if w.endswith("y") and w[-2:-1] not in "aeiou":
        return w[:-1] + "ies"
    return w + ("es" if w.endswith(("s", "x", "sh", "ch", "z")) else "s")


WORD_LIST, NAME_LIST = Path(__file__).with_name("english.tsv"), Path(__file__).with_name("names.tsv")
CLASSES = ("noun", "verb", "adj", "adv")


@lru_cache(maxsize=None)
def english_words() -> dict[str, dict[str, tuple[tuple[str, ...], float]]]:
    """The derived word list: class -> {lemma: (forms, log frequency)}, in the list's order (the
    core words of :mod:`.topics` first, then the rest by falling frequency). Nouns have their plural
    as forms, verbs their third person singular and past tense."""
    out: dict[str, dict] = {c: {} for c in CLASSES}
    for line in WORD_LIST.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            c, lemma, forms, freq = line.split("\t")
            out[c][lemma] = (tuple(forms.split(",")) if forms else (), float(freq))
    return out


@lru_cache(maxsize=None)
def name_lists() -> dict[str, tuple[str, ...]]:
    """The census names: {"last": surnames, "first": first names}, most common first."""
    out: dict[str, list] = {"last": [], "first": []}
    for line in NAME_LIST.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            kind, name = line.split("\t")[:2]
            out[kind].append(name)
    return {k: tuple(v) for k, v in out.items()}


def _core(n_topics: int) -> dict[str, dict[str, int]]:
    """class -> {core lemma: home topic (-1: general)}, in the order of their Zipf ranks, plus
    "agent" -> {agent noun: 1}. The ranks take the topics' lists (and the general one) in turn, each
    list most frequent word first, so every topic has common and rarer words of its own."""
    if n_topics > len(TOPICS):
        raise ValueError(f"n_topics={n_topics}, but the lexicon has {len(TOPICS)} topics "
                         f"({', '.join(TOPICS)}): use n_topics <= {len(TOPICS)}.")
    english = english_words()
    out: dict[str, dict] = {c: {} for c in (*CLASSES, "agent")}
    for c, field_ in (("noun", "nouns"), ("verb", "verbs"), ("adj", "adjectives"), ("adv", "adverbs")):
        lists = []
        for z, t in enumerate([*TOPICS.values(), GENERAL]):
            words = (t["agents"] + " " + t["things"]).split() if c == "noun" else list(t[field_]) \
                if c == "verb" else t[field_].split()
            missing = sorted(w for w in words if w not in english[c])
            if missing:
                raise ValueError(f"The core words {', '.join(missing)} are missing from {WORD_LIST.name}: "
                                 "regenerate it with python -m lmcourse.corpora.derive_words.")
            home = z if z < n_topics else -1
            lists.append([(w, home) for w in sorted(words, key=lambda w: -english[c][w][1])])
        for rank in range(max(map(len, lists))):
            out[c].update({w: home for ws in lists if rank < len(ws) for w, home in [ws[rank]]})
    for t in [*TOPICS.values(), GENERAL]:
        out["agent"].update({w: 1 for w in t["agents"].split()})
    return out


def _zipf(n: int, a: float, offset: float) -> np.ndarray:
    return 1.0 / (np.arange(n) + offset) ** a


def _choose(words: dict, core: dict, n: int, taken: set, ok, what: str) -> list[str]:
    """The core lemmas of a class (in their order), then the list's other lemmas in order, whose
    forms are still free, up to ``n`` lemmas; every chosen lemma takes its forms."""
    chosen = list(core)[:n]
    tail = (w for w in words if w not in core)
    for w in chosen:
        forms = {w, *words[w][0]}
        if forms & taken or not ok(w):
            raise ValueError(f"The core {what} {w!r} cannot be used: its forms {sorted(forms)} are "
                             "taken by another word or spelt irregularly.")
        taken |= forms
    for w in tail:
        if len(chosen) == n:
            break
        forms = {w, *words[w][0]}
        if not forms & taken and ok(w):
            taken |= forms
            chosen.append(w)
    if len(chosen) < n:
        raise ValueError(f"The word list has only {len(chosen)} usable {what}: lower the count to at most that.")
    return chosen


def build_lexicon(params: Params) -> Lexicon:
    """All word types with their category and their per-topic weights."""
    rng = np.random.default_rng([params.seed, 1])
    if params.n_keys > len(KEYS) or params.n_values > len(VALUES):
        raise ValueError(f"n_keys and n_values can be at most {len(KEYS)} and {len(VALUES)} (the places and "
                         "products of lmcourse/corpora/topics.py).")
    english, core = english_words(), _core(params.n_topics)
    keys, values = list(KEYS[:params.n_keys]), list(VALUES[:params.n_values])
    taken = {w for ws in FUNCTION_WORDS.values() for w in ws} | set(KEYS) | set(VALUES)
    forms = {c: english[c] for c in CLASSES}
    # Verbs whose -s form is spelt like a plural ('reports', not 'goes') and whose past differs.
    regular = lambda v: forms["verb"][v][0][0] == plural(v) and forms["verb"][v][0][1] != v  # noqa: E731
    nouns = _choose(forms["noun"], core["noun"], params.n_nouns, taken, lambda w: True, "nouns")
    verbs = _choose(forms["verb"], core["verb"], params.n_verbs, taken, regular, "verbs")
    adjs = _choose(forms["adj"], core["adj"], params.n_adjs, taken, lambda w: True, "adjectives")
    advs = _choose(forms["adv"], core["adv"], params.n_advs, taken, lambda w: True, "adverbs")
    census = name_lists()
    ranked = [w for pair in zip(census["last"][0::2], census["last"][1::2], census["first"]) for w in pair]
    names = [w for w in dict.fromkeys(ranked) if w not in taken][:params.n_names]  # a name once
    if len(names) < params.n_names:
        raise ValueError(f"The name list has only {len(names)} usable names: use n_names <= {len(names)}.")

    entries: list[tuple[str, str, int]] = []  # (word, category, lemma)
    for c, ws in FUNCTION_WORDS.items():
        entries += [(w, c, -1) for w in ws]
    pl = [forms["noun"][n][0][0] for n in nouns]
    entries += [(n, "NOUN_SG", i) for i, n in enumerate(nouns)] + [(p, "NOUN_PL", i) for i, p in enumerate(pl)]
    entries += [(forms["verb"][v][0][0], "VERB_SG", i) for i, v in enumerate(verbs)]
    entries += [(v, "VERB_PL", i) for i, v in enumerate(verbs)]
    entries += [(forms["verb"][v][0][1], "VERB_PAST", i) for i, v in enumerate(verbs)]
    entries += [(a, "ADJ", i) for i, a in enumerate(adjs)] + [(a, "ADV", i) for i, a in enumerate(advs)]
    entries += [(n, "NAME", i) for i, n in enumerate(names)]
    entries += [(k, "KEY", i) for i, k in enumerate(keys)] + [(v, "VALUE", i) for i, v in enumerate(values)]
    words = [e[0] for e in entries]
    if len(set(words)) != len(words):
        dup = sorted({w for w in words if words.count(w) > 1})
        raise ValueError(f"Words of two categories collide: {dup[:10]}.")
    cat = np.array([CAT[e[1]] for e in entries])
    lemma = np.array([e[2] for e in entries])
    V, K = len(words), params.n_topics

    # Per-topic weights P(w | cat, z): closed classes share fixed weights, open classes follow Zipf
    # in the order chosen above (the core first), each lemma general or at home in one topic: the
    # core's from topics.py, the tail's drawn at random.
    weight = np.zeros((K, V))
    for c, ws in FUNCTION_WORDS.items():
        for w, x in ws.items():
            weight[:, words.index(w)] = x
    for classes, lemmas, home_of in ((("NOUN_SG", "NOUN_PL"), nouns, core["noun"]),
                                     (("VERB_SG", "VERB_PL", "VERB_PAST"), verbs, core["verb"]),
                                     (("ADJ",), adjs, core["adj"]), (("ADV",), advs, core["adv"])):
        n = len(lemmas)
        home = rng.integers(0, K, size=n)
        home[rng.random(n) < params.general_share] = -1
        is_core = np.array([w in home_of for w in lemmas])
        home[is_core] = [home_of[w] for w in lemmas if w in home_of]
        base = _zipf(n, params.zipf_a, params.zipf_offset)
        factor = np.where(home[None, :] == np.arange(K)[:, None], params.topic_boost, params.off_topic)
        factor[:, home < 0] = 1.0
        for c in classes:
            ids = np.flatnonzero(cat == CAT[c])
            weight[:, ids] = (base * factor)[:, lemma[ids]]
        if classes[0] == "NOUN_SG":
            noun_home = home
    weight[:, cat == CAT["KEY"]] = 1.0  # keys are uniform
    # Weights are normalised per category, then quantised.
    topic_weight = np.zeros((K, V), dtype=np.int64)
    for c in range(len(CATEGORIES)):
        ids = np.flatnonzero(cat == c)
        if c in (CAT["NAME"], CAT["VALUE"]):
            continue
        topic_weight[:, ids] = quantise(weight[:, ids])
    name_ids = np.flatnonzero(cat == CAT["NAME"])
    name_base = np.zeros(V)
    g = quantise(1.0 / (np.arange(len(name_ids)) + 30.0))
    name_base[name_ids] = g / g.sum()
    key_index = np.full(V, -1)
    key_index[cat == CAT["KEY"]] = np.arange(params.n_keys)
    A = rng.standard_normal((params.n_keys, params.n_values))
    lookup = quantise(np.exp(params.lookup_sharpness * (A - A.max(1, keepdims=True))))
    # Each verb prefers a few object nouns: the core's those topics.py names (in its order), the
    # rest (and the tail's) drawn from the core nouns of the verb's topic.
    noun_index = {n: i for i, n in enumerate(nouns)}
    core_nouns = np.flatnonzero([n in core["noun"] for n in nouns])
    objects = {v: o.split() for t in [*TOPICS.values(), GENERAL] for v, o in t["verbs"].items()}
    prefer = np.zeros((len(verbs), params.n_preferred), dtype=np.int64)
    for i, v in enumerate(verbs):
        named = [noun_index[o] for o in objects.get(v, []) if o in noun_index][:params.n_preferred]
        topic = core["verb"].get(v, -2)
        pool = core_nouns[noun_home[core_nouns] == topic] if topic >= 0 else core_nouns
        pool = np.setdiff1d(pool if len(pool) >= params.n_preferred else core_nouns, named)
        extra = rng.choice(pool, params.n_preferred - len(named), replace=False)
        prefer[i] = named + extra.tolist()
    noun_ids = np.stack([np.flatnonzero(cat == CAT["NOUN_SG"]), np.flatnonzero(cat == CAT["NOUN_PL"])])
    agent = np.zeros(V, dtype=bool)
    agent[noun_ids[:, [noun_index[n] for n in core["agent"] if n in noun_index]]] = True
    return Lexicon(words, cat, lemma, topic_weight, name_base, key_index,
                   np.flatnonzero(cat == CAT["VALUE"]), lookup, prefer, noun_ids, agent)


# ----------------------------------------------------------------------------- grammar
@dataclass
class Grammar:
    """A deterministic automaton over *symbols*: the categories, then single words ("literals").

    A literal is emitted only in the states that name it (inside a fixed expression); everywhere
    else the word is just a member of its category. Where a state has both a literal ``w`` and a
    rule for ``w``'s category, the category rule draws from its other words ("``w`` is claimed"),
    so the symbol, and hence the next state, is always a function of the words read. In a
    subject's states the category rule also weights agent nouns up (``Params.agent_boost``)."""

    states: list[str]          # state names; START is 0, DEAD is the last
    delta: np.ndarray          # (S, Σ) next state after emitting a symbol (DEAD if not allowed)
    emit: np.ndarray           # (S, K, Σ) int64 weights of P(symbol | state, topic)
    doc_weight: int            # P(<doc> | START) as a weight out of WEIGHT_UNIT
    styles: np.ndarray         # (K, 5) the per-topic style knobs, for display
    literal: np.ndarray = field(default=None)      # (Σ,) word id of a literal symbol, -1 for a category
    word_symbol: np.ndarray = field(default=None)  # (V,) a word's literal symbol, or -1 if it has none
    context: np.ndarray = field(default=None)      # (S,) which row of ``factor`` a state uses
    factor: np.ndarray = field(default=None)       # (L, V) int64 word weight multipliers; row 0 all ones

    @property
    def claimed(self) -> np.ndarray:
        """(L, V) the words a context's category rule may not draw (its state's literals)."""
        return self.factor == 0

    @property
    def start(self) -> int:
        return 0

    @property
    def dead(self) -> int:
        return len(self.states) - 1

    @property
    def object_noun(self) -> np.ndarray:
        """(S,) True where a noun emitted from the state heads a verb's object: the predicate's
        object, or the object of a relative clause ("the bank that acquired the firm")."""
        names = np.array(self.states)
        return np.char.startswith(names, "OBJ_") | np.char.startswith(names, "RO_")

    @property
    def subject(self) -> np.ndarray:
        """(S,) True in the states of a sentence's subject noun phrase."""
        names = np.array(self.states)
        return np.char.startswith(names, "START") | np.char.startswith(names, "SUBJ")

    def symbol(self, s: np.ndarray, x: np.ndarray, cat: np.ndarray) -> np.ndarray:
        """The symbol that emitted word ``x`` in state ``s`` (broadcast): its literal where ``s``
        has one for it, its category ``cat[x]`` otherwise."""
        lit = self.word_symbol[x]
        here = (lit >= 0) & (self.delta[s, np.maximum(lit, 0)] != self.dead)
        return np.where(here, lit, cat[x])

    def word_weights(self, lex: "Lexicon") -> np.ndarray:
        """(L, K, V) int64: P(w | category, topic) as weights, with each context's claimed words
        removed and, in a subject, agent nouns weighted up."""
        return self.factor[:, None, :] * lex.topic_weight[None]


STYLE_KEYS = ("pp", "rel", "paren", "conj", "adj")


def _styles(params: Params) -> np.ndarray:
    """Per-topic style knobs: how often subjects take a PP, a relative clause, a parenthesis, and
    how often clauses are joined and nouns take adjectives."""
    rng = np.random.default_rng([params.seed, 2])
    lo = np.array([0.30, 0.10, 0.06, 0.30, 0.30])
    hi = np.array([0.80, 0.45, 0.16, 0.60, 0.80])
    return np.round(lo + (hi - lo) * rng.random((params.n_topics, 5)), 3)


# ----------------------------------------------------------------------------- fixed expressions
# Each table maps a phrase to its weight; "{period}" and the like expand over the choices below
# (weights multiply). A phrase's words are emitted one by one from states of their own, so a word
# two or three back (the "at" of "at the end") predicts the next one where the last word alone
# (the "the") does not: the structure a trigram or a 4-gram model can use.
CHOICES = {
    "period": {"year": 6, "quarter": 4, "month": 2, "week": 1},
    "ordinal": {"first": 3, "second": 3, "third": 3, "fourth": 2},
    "half": {"first": 1, "second": 1},
    "span": {"years": 3, "months": 2, "weeks": 1},
    "recent": {"years": 2, "months": 1},
}
# Time adverbials, at the start of a sentence (before its subject) or after the object.
ADVERBIALS = {
    "at the end of the {period}": 3.0, "by the end of the {period}": 1.0, "in the {ordinal} quarter": 3.0,
    "in the {half} half of the year": 1.0, "for the first time": 1.0, "at the same time": 1.0,
    "in recent {recent}": 0.8, "earlier this {period}": 2.0, "last {period}": 2.0, "N {span} ago": 1.5,
}
SENTENCE_START = {"on the other hand": 0.5, "as a result": 0.5, "in addition": 0.5}
AFTER_OBJECT = {"a year earlier": 1.5, "a year ago": 1.0, "so far this year": 0.5}
# Links after the object, each followed by a noun phrase.
LINKS = {"as well as": 1.0, "such as": 1.0, "according to": 0.5, "because of": 0.5, "in addition to": 0.5}
# Amounts, at the start of a noun phrase that may hold a number ("N UNIT" itself is ordinary syntax).
# Openings of the key-value lookup, in an object: "imports of" + place + product.
KEY_INTROS = {"imports of": 1.0, "exports of": 1.0, "shipments of": 1.0, "supplies of": 0.5}
AMOUNTS = {"$ N million": 3.0, "$ N billion": 1.0, "$ N a share": 0.5, "N cents a share": 1.0,
           "more than N UNIT": 0.5}


def expand(table: dict, total: float = None) -> dict:
    """{"last {period}": 2} -> {"last year": 2 * 6/13, "last quarter": 2 * 4/13, ...}, rescaled to
    sum to ``total`` when given."""
    if total is not None:
        out = expand(table)
        norm = sum(out.values())
        return {p: total * w / norm for p, w in out.items()}
    out = {}
    for phrase, w in table.items():
        slot = phrase[phrase.find("{") + 1:phrase.find("}")] if "{" in phrase else None
        if slot is None:
            out[phrase] = out.get(phrase, 0.0) + w
            continue
        total = sum(CHOICES[slot].values())
        for word, x in CHOICES[slot].items():
            for p, v in expand({phrase.replace("{" + slot + "}", word, 1): w * x / total}).items():
                out[p] = out.get(p, 0.0) + v
    return out


def phrase_rules(host: str, phrases: list[tuple[str, float, str]]) -> list[tuple[str, str, str, float]]:
    """Rules spelling out fixed expressions word by word from ``host``.

    ``phrases`` holds (text, weight, return state). The phrases form a trie: a state
    ``PH:host>w_1 ... w_i`` for every prefix read so far, whose next word has the total weight of
    the phrases below it, and the last word of a phrase leads to the phrase's return state. A word
    in capitals is a category ("UNIT": any unit word)."""
    R: dict[tuple[str, str], list] = {}
    for text, w, ret in phrases:
        words = text.split()
        for i, word in enumerate(words):
            st = host if i == 0 else f"PH:{host}>{' '.join(words[:i])}"
            nxt = ret if i == len(words) - 1 else f"PH:{host}>{' '.join(words[:i + 1])}"
            if (st, word) in R:
                if R[st, word][0] != nxt:
                    raise ValueError(f"The phrase {text!r} at {host} is a prefix of another phrase there (or "
                                     "extends it): make every phrase of a host end where no other goes on.")
                R[st, word][1] += w
            else:
                R[st, word] = [nxt, w]
    return [(st, word, nxt, w) for (st, word), (nxt, w) in R.items()]


# "a" and "an" are words of their own in a noun phrase: "a" leads to a state whose next word
# starts with a consonant sound, "an" to one whose next word starts with a vowel sound.
ARTICLES = {"a": 0.85, "an": 0.15}  # shares of the indefinite article; DET_SG's other words keep theirs


def takes_an(w: str) -> bool:
    """Whether a word reads after "an": 'an analyst', 'an hour', but 'a university', 'a european'."""
    if w.startswith(("hour", "honest", "honor", "heir")):
        return True
    if w.startswith(("uni", "use", "usu", "ute", "uti", "uto", "eu", "one", "once", "ure", "uri", "ubi")):
        return False
    return w[:1] in tuple("aeiou")


def _rules(s: dict, rate: float = 1.0, lookup_rate: float = 0.06) -> list[tuple[str, str, str, float]]:
    """The sentence automaton as (state, category, next state, weight) rules; ``s`` is one topic's style.

    ``n`` is the subject's number (sg/pl), carried until the verb; ``a`` is a noun phrase's number
    as fixed by its determiner (any/sg/pl); ``rate`` scales the fixed expressions; ``lookup_rate``
    is the share of objects that are a key-value lookup. A rule's "category" may be a single word
    instead ("the"): the word itself, in that state only."""
    R = []
    amounts = expand(AMOUNTS, 0.12 * rate)

    def np_(prefix, after, n=None, allow_num=True, adjs=True):
        """A noun phrase: determiner, up to two adjectives, noun; or a name, <unk> or 'N unit'."""
        tag = f"[{n}]" if n else ""
        sg = FUNCTION_WORDS["DET_SG"]
        indefinite = sg["a"] / sum(w for d, w in sg.items() if d not in ARTICLES)  # "a"'s weight against the rest
        for article, share in ARTICLES.items():  # the article's own state: only its next word differs
            R.append((prefix + tag, article, f"{prefix}_ADJ{tag}[{article}]", 0.22 * indefinite / (1 + indefinite) * share))
            if adjs:
                R.append((f"{prefix}_ADJ{tag}[{article}]", "ADJ", f"{prefix}_ADJ2{tag}[sg]", s["adj"]))
            R.append((f"{prefix}_ADJ{tag}[{article}]", "NOUN_SG", after("sg"), 1.0))
        for det, a in (("DET", "any"), ("DET_SG", "sg"), ("DET_PL", "pl")):
            w = {"DET": 0.62, "DET_SG": 0.22 / (1 + indefinite), "DET_PL": 0.16}[det]
            R.append((prefix + tag, det, f"{prefix}_ADJ{tag}[{a}]", w))
            for k, (st, nxt_adj) in enumerate(((f"{prefix}_ADJ{tag}[{a}]", f"{prefix}_ADJ2{tag}[{a}]"),
                                               (f"{prefix}_ADJ2{tag}[{a}]", f"{prefix}_N{tag}[{a}]"),
                                               (f"{prefix}_N{tag}[{a}]", None))):
                if nxt_adj and adjs:
                    R.append((st, "ADJ", nxt_adj, s["adj"] * (0.5 if k else 1.0)))
                if a != "pl":
                    R.append((st, "NOUN_SG", after("sg"), 1.0))
                if a != "sg":
                    R.append((st, "NOUN_PL", after("pl"), 1.0 if a == "pl" else 0.6))
        R.append((prefix + tag, "NAME", after("sg"), 0.10))
        R.append((prefix + tag, "UNK", after("sg"), 0.08))
        if allow_num:  # amounts, and "one of the" leading into a plural noun phrase
            R.extend(phrase_rules(prefix + tag, [("N UNIT", 0.10, after("pl"))]
                                  + [(p, w, after("pl")) for p, w in amounts.items()]
                                  + [("one of the", 0.04 * rate, f"{prefix}_ADJ{tag}[pl]")]))

    # Sentence start: a document marker, an optional sentence adverb, then the subject.
    R.append(("START", "ADV_S", "SUBJ", 0.08))
    for st in ("START", "SUBJ"):
        R.append((st, "PRON_SG", "VERB[sg]", 0.12))
        R.append((st, "PRON_PL", "VERB[pl]", 0.06))
        np_(st, lambda num: f"POST0[{num}]", allow_num=False)
    R.append(("DOCLINE", "EOS", "START", 1.0))
    opening = expand({**ADVERBIALS, **SENTENCE_START}, 0.25 * rate)
    R += phrase_rules("START", [(p, w, "SUBJ") for p, w in opening.items()])
    for n in ("sg", "pl"):
        verb = "VERB_SG" if n == "sg" else "VERB_PL"
        # After the subject noun: a PP (with an attractor noun), a relative clause, a parenthesis.
        R += [(f"POST0[{n}]", "PREP", f"PP[{n}]", s["pp"]), (f"POST0[{n}]", "REL", f"RELV[{n}]", s["rel"] / 2),
              (f"POST0[{n}]", "LRB", f"PAR[{n}]", s["paren"] / 2), (f"POST0[{n}]", verb, "OBJ", 1.0)]
        np_("PP", lambda _: f"POST1[{n}]", n)
        R += [(f"POST1[{n}]", "REL", f"RELV[{n}]", s["rel"]), (f"POST1[{n}]", "LRB", f"PAR[{n}]", s["paren"] / 2),
              (f"POST1[{n}]", verb, "OBJ", 1.0)]
        R.append((f"RELV[{n}]", "VERB_PAST", f"RO[{n}]", 1.0))
        np_("RO", lambda _: f"POST2[{n}]", n)
        R += [(f"POST2[{n}]", "LRB", f"PAR[{n}]", s["paren"]), (f"POST2[{n}]", verb, "OBJ", 1.0)]
        # Inside a parenthesis: a noun phrase, maybe with a PP, then the closing -rrb-.
        np_("PAR", lambda _: f"PARPOST[{n}]", n)
        R += [(f"PARPOST[{n}]", "PREP", f"PARPP[{n}]", 0.4), (f"PARPOST[{n}]", "RRB", f"VERB[{n}]", 1.0)]
        np_("PARPP", lambda _: f"PAREND[{n}]", n, adjs=False)
        R.append((f"PAREND[{n}]", "RRB", f"VERB[{n}]", 1.0))
        R.append((f"VERB[{n}]", verb, "OBJ", 1.0))
    # The predicate: an object (or a key-value lookup), PPs, adverbs, a joined clause, the end.
    np_("OBJ", lambda _: "OPOST")
    R += [("OBJ", "ADV", "END", 0.08), ("OBJ", "PREP", "OPP", 0.10), ("OBJ", "EOS", "START", 0.04)]
    # The lookup takes a fixed share of all objects. It opens with a fixed expression ("imports of
    # texas beef"), or, with the fixed expressions turned off, starts at its key ("texas beef").
    share = sum(w for st, _, _, w in R if st == "OBJ") * lookup_rate / (1 - lookup_rate)
    if rate > 0:
        R += phrase_rules("OBJ", [(p, w, "LOOKUP") for p, w in expand(KEY_INTROS, share).items()])
        R.append(("LOOKUP", "KEY", "OVAL", 1.0))
    else:
        R.append(("OBJ", "KEY", "OVAL", share))
    R += [("OVAL", "VALUE", "OPOST", 1.0),
          ("OPOST", "PREP", "OPP", 0.7), ("OPOST", "ADV", "END", 0.1), ("OPOST", "CONJ", "SUBJ", s["conj"]),
          ("OPOST", "EOS", "START", 1.0)]
    closing, links = expand({**ADVERBIALS, **AFTER_OBJECT}, 0.45 * rate), expand(LINKS, 0.15 * rate)
    R += phrase_rules("OPOST", [(p, w, "END") for p, w in closing.items()] + [(p, w, "OPP") for p, w in links.items()])
    np_("OPP", lambda _: "END")
    R += [("END", "PREP", "OPP", 0.3), ("END", "CONJ", "SUBJ", s["conj"]), ("END", "EOS", "START", 1.0)]
    return R


def build_grammar(params: Params, lex: Lexicon = None) -> Grammar:
    """Compile the rules of every topic's style into one automaton with per-topic emission weights."""
    lex = build_lexicon(params) if lex is None else lex
    styles = _styles(params)
    K, C, V = params.n_topics, len(CATEGORIES), len(lex.words)
    per_topic = [_rules(dict(zip(STYLE_KEYS, styles[z])), params.phrase_rate, params.lookup_rate) for z in range(K)]
    names = ["START"] + sorted({r[0] for rules in per_topic for r in rules if r[3] != 0} - {"START"}) + ["DEAD"]
    index, word_id = {n: i for i, n in enumerate(names)}, {w: i for i, w in enumerate(lex.words)}
    # A single word is its own symbol, unless it is the only word of its category ("N", "<eos>").
    words_used = {r[1] for rules in per_topic for r in rules if r[1] not in CAT and r[3] != 0}
    unknown = sorted(w for w in words_used if w not in word_id)
    if unknown:
        raise ValueError(f"The fixed expressions use words missing from the lexicon ({', '.join(unknown)}): "
                         "add them to FUNCTION_WORDS['FIXED'].")
    sizes = np.bincount(lex.cat, minlength=C)
    literals = sorted(word_id[w] for w in words_used if sizes[lex.cat[word_id[w]]] > 1)
    sym = {**CAT, **{lex.words[w]: C + j for j, w in enumerate(literals)}}
    sym.update({w: int(lex.cat[word_id[w]]) for w in words_used if w not in sym})
    S, n_sym = len(names), C + len(literals)
    delta = np.full((S, n_sym), S - 1)
    emit = np.zeros((S, K, n_sym))
    for z, rules in enumerate(per_topic):
        for st, c, nxt, w in rules:
            if w == 0:
                continue
            assert delta[index[st], sym[c]] in (S - 1, index[nxt]), (st, c)
            delta[index[st], sym[c]] = index[nxt]
            emit[index[st], z, sym[c]] += w
    delta[index["START"], CAT["DOC"]] = index["DOCLINE"]
    literal = np.concatenate([np.full(C, -1), literals]).astype(np.int64)
    word_symbol = np.full(V, -1)
    word_symbol[literals] = np.arange(C, n_sym)
    gram = Grammar(names, delta, quantise(emit), int(round(WEIGHT_UNIT / params.doc_sentences)), styles,
                   literal, word_symbol)
    # A state's context: the literals it claims (those whose category also has a rule in that
    # state), whether it is in a subject (where agent nouns weigh more), and the article it follows
    # ("a": no word that takes "an"; "an": only those).
    claims = [frozenset(w for w in literals if delta[s, sym[lex.words[w]]] != S - 1 and delta[s, lex.cat[w]] != S - 1)
              for s in range(S)]
    article = [next((a for a in ARTICLES if name.endswith(f"[{a}]")), "") for name in names]
    keys = [(c, bool(subj), a) for c, subj, a in zip(claims, gram.subject, article)]
    plain = (frozenset(), False, "")
    sets = [plain] + sorted(set(keys) - {plain}, key=lambda k: (sorted(k[0]), k[1], k[2]))
    an = np.array([takes_an(w) for w in lex.words])
    factor = np.ones((len(sets), V), dtype=np.int64)
    for k, (ws, subj, a) in enumerate(sets):
        if subj:
            factor[k, lex.agent] = params.agent_boost
        if a:
            factor[k, an != (a == "an")] = 0
        factor[k, list(ws)] = 0
    gram.context, gram.factor = np.array([sets.index(k) for k in keys]), factor
    assert not (np.isin(literal, lex.noun_ids) & (delta[gram.object_noun] != S - 1)).any(), \
        "object-noun states take no literal nouns"
    return gram


def preference_mass(lex: Lexicon, factor: np.ndarray = None) -> np.ndarray:
    """(K, n_verbs) S[z, v]: the probability, under topic z, of the nouns that verb v prefers; with a
    grammar's context ``factor`` (L, V), (L, K, n_verbs): the same among the nouns each context allows
    (after "a", no noun that takes "an").

    An object noun after verb v has probability
    p(n | z, v) = p(n | z) (1 + (beta - 1) [n preferred by v]) / (1 + (beta - 1) S[z, v])."""
    sg = lex.noun_ids[0]
    f = np.ones((1, len(sg)), dtype=np.int64) if factor is None else factor[:, sg]  # (L, n_nouns)
    w = f[:, None, :] * lex.topic_weight[None, :, sg]                                # (L, K, n_nouns)
    w = w / np.maximum(w.sum(-1, keepdims=True), 1)
    S = w[..., lex.prefer].sum(-1)                                                   # (L, K, n_verbs)
    return S[0] if factor is None else S


VERB_CATS = (CAT["VERB_SG"], CAT["VERB_PL"], CAT["VERB_PAST"])
NOUN_CATS = (CAT["NOUN_SG"], CAT["NOUN_PL"])
