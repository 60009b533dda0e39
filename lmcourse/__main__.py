"""The command line: ``python -m lmcourse <command> ...``.

Commands:
  data      fetch (or generate) a corpus and print its sizes
  ngram     build an n-gram model and print its perplexities (last line: JSON)
  oracle    the embedded corpus's exact perplexity floor (last line: JSON)
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def _add_data(sub) -> None:
    p = sub.add_parser("data", help="fetch or generate a corpus and print its sizes")
    p.add_argument("--data", default=None, help="ptb | wikitext-2 | tinyshakespeare | embedded | a folder")
    p.add_argument("--level", default="word", choices=("word", "char"))
    p.set_defaults(run=_run_data)


def _run_data(args) -> dict:
    from .data import load_corpus

    t0 = time.perf_counter()
    c = load_corpus(args.data, level=args.level)
    out = {"data": c.name, "level": c.level, "vocab": len(c.vocab), "train": len(c.train),
           "valid": len(c.valid), "test": len(c.test), "seconds": round(time.perf_counter() - t0, 3)}
    print(json.dumps(out))
    return out


def _add_oracle(sub) -> None:
    p = sub.add_parser("oracle", help="perplexity of the embedded corpus under its own generator")
    p.set_defaults(run=_run_oracle)


def _run_oracle(args) -> dict:
    from .data import load_corpus
    from .lm import perplexity
    from .oracle import Oracle

    t0 = time.perf_counter()
    c = load_corpus()
    oracle = Oracle(c.vocab)
    out = {"model": "oracle", "valid_ppl": round(perplexity(oracle, c.valid), 3),
           "test_ppl": round(perplexity(oracle, c.test), 3), "seconds": round(time.perf_counter() - t0, 3)}
    print(json.dumps(out))
    return out


def build_parser() -> argparse.ArgumentParser:
    from . import ngram

    parser = argparse.ArgumentParser(prog="python -m lmcourse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_data(sub)
    ngram.add_cli(sub)
    _add_oracle(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if hasattr(args, "run"):
            args.run(args)
        else:
            from . import ngram
            ngram.run_cli(args)
    except (ValueError, KeyError, FileNotFoundError, ConnectionError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
