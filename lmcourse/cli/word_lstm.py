"""The ``word-lstm`` command: the word LSTM of pytorch/examples' recipe, loaded from the user's cache when stored,
else trained by the one function that trains it (:func:`lmcourse.course.runs.word_lstm.train`), then scored; last
line JSON."""
from __future__ import annotations

import time
from ..config import SCALES, dataset, scale
from ..corpora.data import load_corpus
from ..errors import LMCourseError
from ..course.runs import word_lstm
from ..lm import perplexity

from .output import print_json


def add_cli(subparsers) -> None:
    """Add the ``word-lstm`` subcommand."""
    p = subparsers.add_parser("word-lstm", help="train (or load) the word LSTM of pytorch/examples' recipe and score it")
    p.add_argument("--data", default=None, help="corpus name or folder (default: $LMCOURSE_DATASET, else embedded)")
    p.add_argument("--scale", default=None, choices=SCALES, help="default: $LMCOURSE_SCALE, else cpu")
    p.add_argument("--retrain", action="store_true", help="train it afresh instead of loading the stored run")
    p.set_defaults(run=run_cli)


def run_cli(args) -> dict:
    """Load or train the word LSTM, print one human line and then a JSON line; returns the JSON's dict."""
    t0 = time.perf_counter()
    data, at = dataset() if args.data is None else args.data, args.scale or scale()
    corpus = load_corpus(data)
    run = word_lstm.train(corpus, at, data, retrain=True if args.retrain else None, progress=False)
    if not run.loaded and (run.stop_reason in ("nan", "diverged") or not run.history):
        why = f"diverged (stop reason {run.stop_reason!r})" if run.stop_reason in ("nan", "diverged") else \
            f"ended ({run.stop_reason or 'no reason given'})"
        raise LMCourseError(f"The word LSTM's training {why} after {len(run.history)} finished epochs, so it has no "
                            f"trained weights to score and none were stored as finished: check the corpus {data} "
                            "(a word LSTM needs more than a few lines of text), then run the command again.")
    valid_ppl, test_ppl = perplexity(run.model, corpus.valid), perplexity(run.model, corpus.test)
    name, _ = word_lstm.word_lstm(at)
    result = {"model": name, "data": corpus.name, "scale": at, "loaded": run.loaded, "epochs": len(run.history),
              "valid_ppl": round(valid_ppl, 3), "test_ppl": round(test_ppl, 3),
              "seconds": round(time.perf_counter() - t0, 3)}
    print(f"{name} ({'loaded' if run.loaded else 'trained'}) on {corpus.name}: valid ppl {valid_ppl:.2f}, "
          f"test ppl {test_ppl:.2f}")
    print_json(result)
    return result
