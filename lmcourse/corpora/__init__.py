"""Corpora: the token streams every lesson reads (floor 1: stands on the top-level base modules only).

- :mod:`.data`: loading PTB, WikiText-2, Tiny Shakespeare or the embedded corpus; ``batchify`` and BPTT batches;
- :mod:`.download`: fetching the real corpora, atomically and verified by sha256;
- :mod:`.grammar`: the probabilistic grammar behind the embedded corpus, and its lexicon of English words;
- :mod:`.topics`: the lexicon's hand-written core, six topics of nouns, verbs with their objects, adjectives, adverbs;
- :mod:`.embedded`: that corpus, generated offline from a seed;
- :mod:`.oracle`: the grammar's exact next-token probabilities, the floor drawn on every curve;
- :mod:`.wordcheck`: how much of a corpus is English (its words against a dictionary);
- :mod:`.derive_words`: writes the word lists ``english.tsv`` and ``names.tsv`` from their sources (not run by the course).
"""
from .data import Corpus, batchify, bptt_batches, load_corpus

__all__ = ["Corpus", "load_corpus", "batchify", "bptt_batches"]
