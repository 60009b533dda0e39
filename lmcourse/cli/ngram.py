"""The ``ngram`` command: build an n-gram model on train, score valid and test, print a JSON line."""
from __future__ import annotations

import sys
import time

from ..config import dataset
from ..corpora.data import load_corpus, rare_words_note
from ..lm import perplexity
from ..ngram.model import MODES, SMOOTHINGS, NGramLM, check_settings
from .output import print_json


def add_cli(subparsers) -> None:
    """Add the ``ngram`` subcommand: build on train, score valid and test."""
    p = subparsers.add_parser("ngram", help="build an n-gram model on train and score valid and test")
    p.add_argument("--data", default=None, help="corpus name or folder (default: $LMCOURSE_DATASET, else embedded)")
    p.add_argument("--order", type=int, default=5, help="n-gram order (default 5)")
    p.add_argument("--mode", choices=MODES, default="sentence", help="sentence (<s> per line) or stream")
    p.add_argument("--smoothing", choices=SMOOTHINGS, default="mkn", help="default: modified Kneser-Ney")
    p.add_argument("--k", type=float, default=1.0, help="the k of add-k smoothing (default 1)")
    p.add_argument("--min-count", type=int, default=1, help="read words seen fewer times in train as <unk> "
                                                            "(default 1)")
    p.set_defaults(run=run_cli)


def run_cli(args) -> dict:
    """Build, score, print one human line and then a JSON line; returns the JSON's dict."""
    check_settings(args.order, args.smoothing, args.k, args.mode)  # before the corpus is read
    corpus = load_corpus(dataset() if args.data is None else args.data, min_count=getattr(args, "min_count", 1))
    note = rare_words_note(corpus, getattr(args, "min_count", 1))
    if note:
        print(note, file=sys.stderr)
    t0 = time.perf_counter()
    lm = NGramLM(corpus.vocab, args.order, args.smoothing, args.k, args.mode).fit(corpus.train)
    valid_ppl, test_ppl = perplexity(lm, corpus.valid), perplexity(lm, corpus.test)
    seconds = time.perf_counter() - t0
    result = {"data": corpus.name, "order": args.order, "mode": args.mode, "smoothing": args.smoothing,
              "k": args.k if args.smoothing == "addk" else None, "valid_ppl": valid_ppl, "test_ppl": test_ppl,
              "seconds": round(seconds, 3), "ngrams": lm.num_ngrams}
    print(f"{lm.name} on {corpus.name}: valid ppl {valid_ppl:.2f}, test ppl {test_ppl:.2f} "
          f"(build + score {seconds:.2f} s)")
    print_json(result)
    return result
