r"""The oracle: the exact next-token distribution of the embedded corpus's generator.

For a token stream it gives :math:`p(x_t \mid x_{<t})` under the program that wrote the corpus,
marginalising the program's one hidden choice that the words do not reveal, the document's
topic :math:`z`:

.. math::

    p(x_t \mid x_{<t}) = \sum_z p(z \mid x_{<t}) \; p(c_t \mid s_t, z) \; p(x_t \mid c_t, s_t, z, x_{<t}),

    p(z \mid x_{<t}) \propto p(z) \prod_{i \in \text{doc}, i<t} p(c_i \mid s_i, z)\, p(x_i \mid c_i, s_i, z).

Here :math:`c_t` is the symbol that emitted the word (its category, or inside a fixed expression
the word itself) and :math:`s_t` the grammar state, a function of the words read so far (every
word belongs to one category, a state names a word as a literal or leaves it to its category,
and the automaton is deterministic). A category's word distribution leaves out the words that
the state claims as literals.
Names follow the document's Chinese-restaurant process,
:math:`p(w) = (n_w + \alpha G(w)) / (j + \alpha)` with :math:`n_w` earlier mentions of ``w`` among
the document's :math:`j` name slots; a value word follows its key through the lookup table.

No model can beat it on average: its test perplexity is the floor drawn on the lessons' plots.
"""
from __future__ import annotations

import numpy as np
import torch

from ..lm import LanguageModel, check_tokens
from ..vocab import Vocab
from .grammar import CAT, NOUN_CATS, VERB_CATS, WEIGHT_UNIT, Params, build_grammar, build_lexicon, preference_mass


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (np.log(np.exp(a - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)


class Oracle(LanguageModel):
    """Exact scorer of the embedded corpus; build it with the corpus's vocabulary."""

    name = "oracle"

    def __init__(self, vocab: Vocab, params: Params = Params()):
        lex = build_lexicon(params)
        gram = build_grammar(params, lex)
        if vocab.itos != lex.words:
            raise ValueError("The oracle only scores the embedded corpus: load it with load_corpus() "
                             "and pass corpus.vocab (this vocabulary differs from the generator's).")
        self.vocab, self.params, self.lex, self.gram = vocab, params, lex, gram
        emit = gram.emit / np.maximum(gram.emit.sum(-1, keepdims=True), 1)  # (S, K, Σ); DEAD rows stay 0
        h = gram.doc_weight / WEIGHT_UNIT                                 # P(<doc> | sentence start)
        emit[gram.start] *= 1 - h
        emit[gram.start, :, CAT["DOC"]] = h
        self.log_emit = _log(emit)                                        # (S, K, Σ)
        weights = gram.word_weights(lex)                                  # (L, K, V)
        totals = np.zeros(weights.shape[:2] + (len(CAT),))
        np.add.at(totals.transpose(2, 0, 1), lex.cat, weights.transpose(2, 0, 1))  # (L, K, C) category totals
        word = weights / np.maximum(totals[:, :, lex.cat], 1)             # (L, K, V) p(w | category, topic)
        special = np.isin(lex.cat, [CAT["NAME"], CAT["VALUE"]])
        word[:, :, special] = 1.0                                         # handled by the CRP / lookup
        self.word, self.log_word = word, _log(word)                       # (L, K, V)
        self.n_cat = len(CAT)
        self.cat = lex.cat                                                # (V,)
        self.is_name = lex.cat == CAT["NAME"]
        self.alpha = params.name_alpha
        lookup = lex.lookup / lex.lookup.sum(1, keepdims=True)
        self.log_lookup = _log(lookup)                                    # (n_keys, n_values)
        self.value_index = np.full(len(lex.words), -1)
        self.value_index[lex.value_ids] = np.arange(len(lex.value_ids))
        self.eos, self.doc = vocab.stoi["<eos>"], vocab.stoi["<doc>"]
        self.beta, self.S = params.preference, preference_mass(lex, gram.factor)  # (L, K, n_verbs)
        self.preferred = np.zeros((len(lex.prefer), len(lex.words)), dtype=bool)  # (n_verbs, V)
        for form in lex.noun_ids:
            self.preferred[np.arange(len(lex.prefer))[:, None], form[lex.prefer]] = True
        self.is_noun, self.is_verb = np.isin(lex.cat, NOUN_CATS), np.isin(lex.cat, VERB_CATS)
        self.object_noun = gram.object_noun                                # (S,)

    def _emission(self, s: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log p(x | s, z) = log p(symbol | s, z) + log p(x | symbol, s, z) for words x read in states s:
        (n, K), and the symbols (n,). A literal symbol is its word, so its second term is 0."""
        sym = self.gram.symbol(s, x, self.cat)                            # (n,)
        word = np.where(sym[:, None] >= self.n_cat, 0.0, self.log_word[self.gram.context[s], :, x])
        return self.log_emit[s, :, sym] + word, sym

    def _preference(self, x: np.ndarray, verb: np.ndarray, ctx: np.ndarray) -> np.ndarray:
        """log of the selectional-preference factor for object nouns x after verbs ``verb``, drawn in
        states of contexts ``ctx``: (n, K)."""
        boost = 1 + (self.beta - 1) * self.preferred[verb, x]              # (n,)
        return np.log(boost)[:, None] - np.log1p((self.beta - 1) * self.S[ctx, :, verb])

    # ------------------------------------------------------------------ whole-stream scoring
    def states(self, x: np.ndarray) -> np.ndarray:
        """Grammar state before each token: the automaton run line by line, all lines at once."""
        line = np.concatenate([[0], np.cumsum(x[:-1] == self.eos)])      # (N,) line of each token
        first = np.searchsorted(line, line)                               # first position of its line
        pos = np.arange(len(x)) - first                                   # position inside the line
        grid = np.zeros((line[-1] + 1, pos.max() + 1), dtype=np.int64)  # words; padding reads <eos>
        grid[line, pos] = x
        s = np.full(grid.shape, self.gram.start)
        for j in range(grid.shape[1] - 1):                               # loop over positions, not tokens
            s[:, j + 1] = self.gram.delta[s[:, j], self.gram.symbol(s[:, j], grid[:, j], self.cat)]
        return s[line, pos]

    def _topic_terms(self, x: np.ndarray):
        """Per token: the topic-dependent log-likelihood (N, K), the log posterior over topics given
        the document so far (N, K), and the document segment of each token."""
        s = self.states(x)
        ll = self._emission(s, x)[0]                                      # (N, K)
        obj = np.flatnonzero(self.object_noun[s] & self.is_noun[x])
        last_verb = np.maximum.accumulate(np.where(self.is_verb[x], np.arange(len(x)), 0))
        ll[obj] += self._preference(x[obj], self.lex.lemma[x[last_verb[obj]]], self.gram.context[s[obj]])
        ll_post = np.where(np.isfinite(ll), ll, -1e4)
        ll_post -= ll_post.max(1, keepdims=True)
        seg = np.concatenate([[0], np.cumsum(x[:-1] == self.doc)])        # topic resets after <doc>
        cum = np.vstack([np.zeros((1, ll.shape[1])), np.cumsum(ll_post, 0)])  # (N+1, K) sums before t
        C = cum[:-1] - cum[np.searchsorted(seg, seg)]                     # (N, K) log-likelihood in doc
        return ll, C - _logsumexp(C, 1)[:, None], seg

    def score(self, tokens) -> torch.Tensor:
        x = check_tokens(tokens, len(self.vocab)).cpu().numpy()
        ll, log_post, seg = self._topic_terms(x)
        logp = _logsumexp(log_post + ll, 1)                               # (N,)
        return torch.from_numpy(logp + self._names(x, seg) + self._values(x))

    def topic_posterior(self, tokens) -> torch.Tensor:
        """p(z | x_<t) for every position: (N, K). It sharpens as a document goes on."""
        x = check_tokens(tokens, len(self.vocab)).cpu().numpy()
        return torch.from_numpy(np.exp(self._topic_terms(x)[1]))

    def agreement(self, tokens) -> tuple[torch.Tensor, torch.Tensor]:
        """Subject-verb pairs: (verb positions, distance back to the subject's head word).

        The verb's number must match its subject's; the longer the distance, the harder it is for
        a model with a short window."""
        x = check_tokens(tokens, len(self.vocab)).cpu().numpy()
        s, c = self.states(x), self.cat[x]
        names = np.array(self.gram.states)
        subject_state = np.char.startswith(names, "START") | np.char.startswith(names, "SUBJ")
        heads = subject_state[s] & np.isin(c, [CAT[k] for k in ("NOUN_SG", "NOUN_PL", "NAME", "UNK",
                                                                  "PRON_SG", "PRON_PL")])
        verbs = np.flatnonzero(np.isin(c, [CAT["VERB_SG"], CAT["VERB_PL"]])
                               & ~np.char.startswith(names, "RELV")[s])
        last_head = np.maximum.accumulate(np.where(heads, np.arange(len(x)), -1))
        return torch.from_numpy(verbs), torch.from_numpy(verbs - last_head[verbs])

    def _names(self, x: np.ndarray, seg: np.ndarray) -> np.ndarray:
        """log((n_w + alpha G(w)) / (j + alpha)) at name tokens, 0 elsewhere."""
        out = np.zeros(len(x))
        p = np.flatnonzero(self.is_name[x])
        if len(p) == 0:
            return out
        g, w = seg[p], x[p]
        j = np.arange(len(p)) - np.searchsorted(g, g)                     # earlier name slots in the doc
        order = np.lexsort((p, w, g))                                     # group by (doc, word), in time
        key = g[order] * len(self.vocab) + w[order]
        n_w = np.empty(len(p), dtype=np.int64)
        n_w[order] = np.arange(len(p)) - np.searchsorted(key, key)        # earlier mentions of w
        out[p] = np.log((n_w + self.alpha * self.lex.name_base[w]) / (j + self.alpha))
        return out

    def _values(self, x: np.ndarray) -> np.ndarray:
        """log p(value | key) at value tokens (the key is the previous token), 0 elsewhere."""
        out = np.zeros(len(x))
        p = np.flatnonzero(self.value_index[x] >= 0)
        p = p[p > 0]
        key = self.lex.key_index[x[p - 1]]
        ok = key >= 0
        out[p[ok]] = self.log_lookup[key[ok], self.value_index[x[p[ok]]]]
        out[p[~ok]] = -np.inf
        return out

    # ------------------------------------------------------------------ step by step
    def start(self, batch_size: int = 1) -> dict:
        B, K = batch_size, self.params.n_topics
        return {"s": np.full(B, self.gram.start), "C": np.zeros((B, K)),
                "names": np.zeros((B, len(self.vocab))), "prev": np.full(B, self.eos),
                "verb": np.zeros(B, dtype=np.int64)}

    def next_log_probs(self, state: dict) -> torch.Tensor:
        C = state["C"]
        post = np.exp(C - _logsumexp(C, 1)[:, None])                     # (B, K)
        s, V = state["s"], len(self.vocab)
        sym = self.gram.symbol(s[:, None], np.arange(V)[None, :], self.cat)  # (B, V)
        emit = np.exp(self.log_emit[s])                                   # (B, K, Σ)
        emit = np.take_along_axis(emit, np.broadcast_to(sym[:, None, :], (len(s), emit.shape[1], V)), 2)
        terms = emit * np.where(sym[:, None, :] >= self.n_cat, 1.0, self.word[self.gram.context[s]])  # (B, K, V)
        obj = np.flatnonzero(self.object_noun[state["s"]])
        if len(obj):
            nouns = np.flatnonzero(self.is_noun)
            v = state["verb"][obj]
            ctx = np.repeat(self.gram.context[state["s"][obj]], len(nouns))
            factor = np.exp(self._preference(np.tile(nouns, len(obj)), np.repeat(v, len(nouns)), ctx))
            terms[obj[:, None], :, nouns[None, :]] *= factor.reshape(len(obj), len(nouns), -1)
        p = np.einsum("bk,bkv->bv", post, terms)                          # (B, V)
        logp = _log(p)
        n = state["names"]
        j = n.sum(1, keepdims=True)
        crp = (n + self.alpha * self.lex.name_base[None]) / (j + self.alpha)
        logp[:, self.is_name] += np.log(crp[:, self.is_name])
        vals = self.lex.value_ids
        key = self.lex.key_index[state["prev"]]                           # (B,)
        logp[:, vals] += np.where(key[:, None] >= 0, self.log_lookup[np.maximum(key, 0)], -np.inf)
        return torch.from_numpy(logp)

    def advance(self, state: dict, tokens) -> dict:
        x = torch.as_tensor(tokens).cpu().numpy().astype(np.int64)
        s = state["s"]
        ll, sym = self._emission(s, x)                                    # (B, K), (B,)
        obj = np.flatnonzero(self.object_noun[s] & self.is_noun[x])
        ll[obj] += self._preference(x[obj], state["verb"][obj], self.gram.context[s[obj]])
        ll = np.where(np.isfinite(ll), ll, -1e4)
        C = state["C"] + ll - ll.max(1, keepdims=True)
        names = state["names"].copy()
        names[np.flatnonzero(self.is_name[x]), x[self.is_name[x]]] += 1
        new_doc = x == self.doc
        C[new_doc] = 0.0
        names[new_doc] = 0.0
        s = np.where(self.cat[x] == CAT["EOS"], self.gram.start, self.gram.delta[s, sym])
        verb = np.where(self.is_verb[x], self.lex.lemma[x], state["verb"])
        return {"s": s, "C": C, "names": names, "prev": x, "verb": verb}

    def reorder(self, state: dict, index) -> dict:
        i = torch.as_tensor(index).cpu().numpy()
        return {k: v[i] for k, v in state.items()}
