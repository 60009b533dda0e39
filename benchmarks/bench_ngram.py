"""N-gram models: build + score time, perplexity against KenLM, and NLTK's Kneser-Ney side by side.

    python benchmarks/bench_ngram.py [--repeats 3] [--nltk-train-lines 5000] [--nltk-test-lines 20]

Needs the real corpora (PTB, WikiText-2) under LMCOURSE_DATA (default: ../shared/data beside the
repository). The NLTK part needs ``pip install nltk`` and is skipped with a message otherwise.
Every timing of a peer is taken in the same run, on the same machine, on the same tokens.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if "LMCOURSE_DATA" not in os.environ and _SHARED.is_dir():
    os.environ["LMCOURSE_DATA"] = str(_SHARED)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from lmcourse.corpora.data import load_corpus  # noqa: E402
from lmcourse.lm import perplexity  # noqa: E402
from lmcourse.ngram.model import NGramLM  # noqa: E402

# KenLM lmplz (modified KN, no pruning) perplexities, </s> counted once a line (see tests/test_ngram.py).
KENLM = {
    ("ptb", 2, "test"): 185.70, ("ptb", 3, "test"): 148.28, ("ptb", 4, "test"): 142.72,
    ("ptb", 5, "test"): 141.19, ("ptb", 5, "valid"): 148.01,
    ("wikitext-2", 5, "test"): 220.14, ("wikitext-2", 5, "valid"): 234.86,
}


def timed(fn, repeats: int):
    """Median wall time of ``repeats`` calls, and the last call's result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def build_and_score(corpus, order: int, smoothing: str = "mkn", mode: str = "sentence"):
    lm = NGramLM(corpus.vocab, order, smoothing, mode=mode).fit(corpus.train)
    return perplexity(lm, corpus.valid), perplexity(lm, corpus.test)


def speed_section(corpora: dict, repeats: int) -> None:
    print("## Build + score valid + score test, 5-gram modified Kneser-Ney, sentence mode\n")
    print(f"| corpus | train tokens | build (s) | score valid+test (s) | total (s), median of {repeats} "
          "| KenLM lmplz + query (not run here) |")
    print("|---|---:|---:|---:|---:|---|")
    for name, corpus in corpora.items():
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            lm = NGramLM(corpus.vocab, 5, "mkn").fit(corpus.train)
            t1 = time.perf_counter()
            lm.score(corpus.valid), lm.score(corpus.test)
            runs.append((t1 - t0, time.perf_counter() - t1, time.perf_counter() - t0))
        build, score, total = (statistics.median(r[i] for r in runs) for i in range(3))
        kenlm = "about 2.3 s reported" if name == "ptb" else "-"
        print(f"| {name} | {len(corpus.train):,} | {build:.2f} | {score:.2f} | **{total:.2f}** | {kenlm} |")
    print()


def quality_section(corpora: dict) -> None:
    print("## Perplexity against KenLM (lmplz -o N, interpolated modified KN, sentence mode)\n")
    print("| corpus | order | valid | KenLM valid | rel. err. | test | KenLM test | rel. err. "
          "| stream-mode valid / test |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, corpus in corpora.items():
        for order in (range(1, 6) if name == "ptb" else (3, 5)):
            valid, test = build_and_score(corpus, order)
            s_valid, s_test = build_and_score(corpus, order, mode="stream")
            cells = []
            for split, ppl in (("valid", valid), ("test", test)):
                ref = KENLM.get((name, order, split))
                cells += [f"{ppl:.2f}", f"{ref:.2f}" if ref else "-", f"{ppl / ref - 1:+.4%}" if ref else "-"]
            print(f"| {name} | {order} | " + " | ".join(cells) + f" | {s_valid:.2f} / {s_test:.2f} |")
    print()


def smoothing_section(corpus) -> None:
    print(f"## Smoothing methods on {corpus.name}, sentence mode (test perplexity)\n")
    print("| order | MLE | add-1 | add-0.01 | KN | modified KN |")
    print("|---:|---:|---:|---:|---:|---:|")
    for order in (1, 2, 3, 5):
        row = []
        for smoothing, k in (("mle", 1.0), ("addk", 1.0), ("addk", 0.01), ("kn", 1.0), ("mkn", 1.0)):
            lm = NGramLM(corpus.vocab, order, smoothing, k=k).fit(corpus.train)
            row.append(f"{perplexity(lm, corpus.test):.2f}")
        print(f"| {order} | " + " | ".join(row) + " |")
    print()


def _lines(tokens: torch.Tensor, vocab) -> list:
    """Split a token stream at <eos> into lists of words (the <eos> dropped)."""
    words, lines, line = vocab.decode(tokens), [], []
    for w in words:
        if w == "<eos>":
            lines.append(line)
            line = []
        else:
            line.append(w)
    return lines + ([line] if line else [])


def nltk_section(corpus, train_lines: int, test_lines: int, repeats: int) -> None:
    print(f"## Against NLTK's KneserNeyInterpolated, order 5, on a slice of {corpus.name}\n")
    try:
        from nltk.lm import KneserNeyInterpolated
        from nltk.lm.preprocessing import padded_everygram_pipeline
    except ImportError:
        print("NLTK is not installed, so this part is skipped: `pip install nltk` to run it.\n")
        return
    eos = corpus.vocab.eos
    ends = torch.nonzero(corpus.train == eos).flatten()
    train = corpus.train[: int(ends[train_lines - 1]) + 1]
    test_ends = torch.nonzero(corpus.test == eos).flatten()
    test = corpus.test[: int(test_ends[test_lines - 1]) + 1]
    lines, held = _lines(train, corpus.vocab), _lines(test, corpus.vocab)

    def nltk_fit():
        grams, vocab = padded_everygram_pipeline(5, lines)
        model = KneserNeyInterpolated(5)
        model.fit(grams, vocab)
        return model

    def nltk_score(model):
        out = []
        for line in held:
            context = ["<s>"] * 4
            for w in line + ["</s>"]:
                out.append(model.score(w, context[-4:]))
                context.append(w)
        return np.array(out)

    nltk_fit_s, model = timed(nltk_fit, 1)
    nltk_score_s, p_nltk = timed(lambda: nltk_score(model), 1)
    ours_fit_s, lm = timed(lambda: NGramLM(corpus.vocab, 5, "mkn").fit(train), repeats)
    ours_score_s, logp = timed(lambda: lm.score(test), repeats)
    kn_fit_s, kn = timed(lambda: NGramLM(corpus.vocab, 5, "kn").fit(train), repeats)
    kn_score_s, kn_logp = timed(lambda: kn.score(test), repeats)
    full_score_s, _ = timed(lambda: lm.score(corpus.test), repeats)
    n = len(test)
    assert len(p_nltk) == n
    positive = p_nltk > 0
    nltk_ppl = math.exp(-np.log(p_nltk[positive]).mean())
    print(f"Train: first {train_lines:,} lines ({len(train):,} tokens). "
          f"Test: first {test_lines} lines ({n:,} tokens).\n")
    print("| model | fit (s) | score, per token (ms) | perplexity on the slice |")
    print("|---|---:|---:|---:|")
    print(f"| NLTK KneserNeyInterpolated (discount 0.1, 1 run) | {nltk_fit_s:.2f} | {1e3 * nltk_score_s / n:.3f} | "
          f"{nltk_ppl:.2f} over the {positive.sum()} tokens it gives p > 0 ({(~positive).sum()} get p = 0) |")
    print(f"| lmcourse NGramLM kn (median of {repeats}) | {kn_fit_s:.4f} | {1e3 * kn_score_s / n:.4f} | "
          f"{math.exp(-kn_logp.mean()):.2f} |")
    print(f"| lmcourse NGramLM mkn (median of {repeats}) | {ours_fit_s:.4f} | {1e3 * ours_score_s / n:.4f} | "
          f"{math.exp(-logp.mean()):.2f} |")
    print(f"| lmcourse mkn, whole test set ({len(corpus.test):,} tokens) | - | "
          f"{1e3 * full_score_s / len(corpus.test):.5f} | - |")
    print(f"\nSpeed-up of lmcourse mkn over NLTK: fit {nltk_fit_s / ours_fit_s:,.0f}x, "
          f"scoring per token {nltk_score_s / ours_score_s:,.0f}x on the same {n} tokens "
          f"({(nltk_score_s / n) / (full_score_s / len(corpus.test)):,.0f}x against the whole-test-set rate).\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nltk-train-lines", type=int, default=5000)
    parser.add_argument("--nltk-test-lines", type=int, default=20)
    args = parser.parse_args()
    try:
        corpora = {name: load_corpus(name) for name in ("ptb", "wikitext-2")}
    except Exception as err:  # the real corpora are not here
        sys.exit(f"The real corpora could not be loaded ({err}): "
                 "set LMCOURSE_DATA to a folder with ptb/ and wikitext-2/.")
    print(f"# n-gram benchmark\n\nMachine: {platform.machine()}, {os.cpu_count()} CPU cores, "
          f"{platform.processor() or platform.platform()}; Python {platform.python_version()}, "
          f"numpy {np.__version__}, torch {torch.__version__}; load average {os.getloadavg()[0]:.1f} at start.\n")
    speed_section(corpora, args.repeats)
    quality_section(corpora)
    smoothing_section(corpora["ptb"])
    nltk_section(corpora["ptb"], args.nltk_train_lines, args.nltk_test_lines, args.repeats)


if __name__ == "__main__":
    main()
