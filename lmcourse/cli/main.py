"""The command line: ``python -m lmcourse <command> ...``.

Commands:
  data      fetch (or generate) a corpus and print its sizes
  ngram     build an n-gram model and print its perplexities (last line: JSON)
  oracle    the embedded corpus's exact perplexity floor (last line: JSON)
  train     train a paper's recipe (--preset) into a run directory (last line: JSON)
  evaluate  score a trained run, optionally with the neural cache and dynamic evaluation (last line: JSON)
  word-lstm the word LSTM of pytorch/examples' recipe: loaded from your cache, else trained, then scored (last line: JSON)
  notebooks copy the lessons and their solutions into a folder (python -m lmcourse notebooks DEST [--force])

--data defaults to $LMCOURSE_DATASET, else the embedded corpus.

Errors: a mistake (an unknown corpus, no network, a damaged file, a bad setting) ends the
program with one line on stderr, "error: <what was wrong and what to do>", and exit status 1;
a command line that does not parse, or an unusable LMCOURSE_* setting, gives status 2; Ctrl-C
gives 130. Add --debug anywhere to see the traceback as well.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

from .. import EXIT_INTERRUPTED, _ctrl_c_raises
from ..config import check_environment, dataset
from ..corpora import data
from ..corpora.oracle import Oracle
from ..errors import ConfigError, LMCourseError, one_line_warning as _one_line_warning, sentence
from ..lm import perplexity

from .output import print_json

EXIT_ERROR, EXIT_USAGE = 1, 2  # EXIT_INTERRUPTED (130) comes from the package's root


class UsageError(Exception):
    """A command line that does not parse (raised instead of argparse's exit, so main reports it)."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one sentence, reported by :func:`main`."""

    def error(self, message: str):
        raise UsageError(f"{message} (see {self.prog} --help).")


def _add_data(sub) -> None:
    p = sub.add_parser("data", help="fetch or generate a corpus and print its sizes")
    p.add_argument("--data", default=None, help="ptb | wikitext-2 | tinyshakespeare | embedded | a folder "
                                                "(default: $LMCOURSE_DATASET, else embedded)")
    p.add_argument("--level", default="word", choices=("word", "char"))
    p.add_argument("--min-count", type=int, default=1, help="read words seen fewer times in train as <unk> "
                                                            "(default 1: keep every word of train)")
    p.set_defaults(run=_run_data)


def _run_data(args) -> dict:
    t0 = time.perf_counter()
    c = data.load_corpus(dataset() if args.data is None else args.data, level=args.level, min_count=args.min_count)
    note = data.rare_words_note(c, args.min_count)
    if note:
        print(note, file=sys.stderr)
    out = {"data": c.name, "level": c.level, "vocab": len(c.vocab), "train": len(c.train),
           "valid": len(c.valid), "test": len(c.test), "unk_mapped": c.unk_mapped,
           "seconds": round(time.perf_counter() - t0, 3)}
    print_json(out)
    return out


def _add_oracle(sub) -> None:
    p = sub.add_parser("oracle", help="perplexity of the embedded corpus under its own generator "
                                      "(always the embedded corpus)")
    p.set_defaults(run=_run_oracle)


def _run_oracle(args) -> dict:
    t0 = time.perf_counter()
    c = data.load_corpus()
    oracle = Oracle(c.vocab)
    out = {"model": "oracle", "data": c.name, "valid_ppl": round(perplexity(oracle, c.valid), 3),
           "test_ppl": round(perplexity(oracle, c.test), 3), "seconds": round(time.perf_counter() - t0, 3)}
    print_json(out)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command.

    A command module offers ``add_cli(subparsers)``: it adds its parser and calls
    ``set_defaults(run=fn)``, where ``fn(args)`` does the work and raises the package's errors
    (:class:`lmcourse.errors.LMCourseError`, or ``ValueError`` / ``TypeError`` from argument
    checks). Register it here with one line; :func:`main` reports its errors and adds ``--debug``.
    """
    from . import ngram, notebooks, reproduce, word_lstm  # here, inside main's handling: a failed import is one line

    parser = Parser(prog="python -m lmcourse", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    _add_data(sub)
    ngram.add_cli(sub)
    _add_oracle(sub)
    reproduce.add_cli(sub)
    word_lstm.add_cli(sub)
    notebooks.add_cli(sub)
    for command in sub.choices.values():
        if "--debug" not in command._option_string_actions:
            command.add_argument("--debug", action="store_true", help="show the traceback of an error")
    return parser


def _report(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    print(f"error: {message}", file=sys.stderr)


def main(argv=None) -> int:
    """Run one command; return the exit status (0 when it worked). Never lets a traceback through."""
    import warnings

    _ctrl_c_raises()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    debug = "--debug" in argv
    shown, warnings.showwarning = warnings.showwarning, (warnings.showwarning if debug else _one_line_warning)
    try:
        return _main(argv, debug)
    finally:
        warnings.showwarning = shown


def _main(argv: list, debug: bool) -> int:
    try:
        check_environment()
        args = build_parser().parse_args(argv)
        args.run(args)
        return 0
    except SystemExit as stop:  # --help
        return stop.code if isinstance(stop.code, int) else EXIT_ERROR
    except (UsageError, ConfigError) as err:
        _report(sentence(err), debug)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _report("interrupted; files are only ever replaced whole, so nothing half-written was left behind.", debug)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the output went to a pipe that closed (`| head`): say so where it can still be read
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        try:
            _report("the output pipe closed (as `| head` does once it has read enough lines), so the command stopped "
                    "there; every file it wrote is whole, and a train run keeps its last finished epoch (continue it "
                    "with --resume).", debug)
        except OSError:  # stderr went into the same closed pipe
            pass
        return EXIT_ERROR
    except (LMCourseError, ValueError, TypeError, KeyError, OSError) as err:
        _report(sentence(err), debug)
        return EXIT_ERROR
    except Exception as err:  # a bug, not a mistake of the user's: still one line, with a way to see more
        _report(f"unexpected {type(err).__name__} ({sentence(err)}): run again with --debug to see where "
                "it happened.", debug)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
