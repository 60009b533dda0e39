"""Resident memory and speed of CPU training under glibc's mmap threshold (lmcourse.memory).

Each row trains the lesson-02 word LSTM (1 x 200, tied, V ~ 10k, bptt ~35 with random window
lengths, batch 20) on the embedded corpus for the same number of batches, in a fresh process, with
one setting of ``LMCOURSE_MMAP_THRESHOLD``: 0 leaves glibc's adaptive threshold alone (the growth
this module fixes), the others fix it. Printed: tokens/s, the peak resident memory and the growth
between the first tenth of the run and its end, and each row's speed and peak as ratios to the
adaptive row.

    python benchmarks/bench_memory.py [--batches 480]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, resource, sys
import lmcourse
import torch
from lmcourse.corpora.data import load_corpus
from lmcourse.networks.models import LMConfig, RNNLM
from lmcourse.training.callbacks import Callback
from lmcourse.training.trainer import Trainer, TrainConfig

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

batches = int(sys.argv[1])
corpus = load_corpus("embedded")
torch.manual_seed(0)
model = RNNLM(LMConfig(vocab_size=len(corpus.vocab), emb_size=200, hidden_size=200, num_layers=1, tie=True))
model.vocab = corpus.vocab
marks = []
class Mark(Callback):
    def on_batch_end(self, trainer, batch_idx, loss):
        marks.append(rss_mb())
cfg = TrainConfig(epochs=1, max_batches=batches, progress=False, live_plot=False, seed=0)
history = Trainer(model, corpus.train, corpus.valid[:2000], cfg, callbacks=[Mark()]).fit()
early = marks[len(marks) // 10] if marks else float("nan")
print(json.dumps(dict(tokens_per_s=history.rows[-1]["tokens_per_s"],
                      peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      growth_mb=(marks[-1] - early) if marks else float("nan"))))
"""

SETTINGS = [("adaptive (glibc default)", "0"), ("128 KiB", str(128 * 1024)),
            ("4 MiB (lmcourse default)", str(4 * 2**20)), ("16 MiB", str(16 * 2**20))]


def run(threshold: str, batches: int) -> dict:
    env = dict(os.environ, LMCOURSE_MMAP_THRESHOLD=threshold)
    out = subprocess.run([sys.executable, "-c", CHILD, str(batches)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=480)
    args = parser.parse_args()
    print(f"{args.batches} batches per row, embedded corpus, 1 x 200 tied LSTM, CPU")
    print(f"{'mmap threshold':<26}{'tokens/s':>10}{'peak MB':>10}{'growth MB':>11}{'speed':>8}{'peak':>8}")
    base = None
    for label, threshold in SETTINGS:
        r = run(threshold, args.batches)
        base = base or r
        print(f"{label:<26}{r['tokens_per_s']:>10.0f}{r['peak_mb']:>10.0f}{r['growth_mb']:>11.0f}"
              f"{r['tokens_per_s'] / base['tokens_per_s']:>7.2f}x{r['peak_mb'] / base['peak_mb']:>7.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
