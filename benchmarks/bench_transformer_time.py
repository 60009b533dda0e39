"""Seconds per epoch of lesson 10's Transformer against lesson 09's AWD rung, measured back to back on one thread.

The lesson's equal-time budget gives the Transformer as many epochs as fit in the AWD rung's training
time. On a machine other jobs share, one run's seconds say more about the load than about the model, so
this measures one epoch of each in turn, ``--rounds`` times, and reports the median of each and their
ratio: the AWD rung's 40 epochs are worth ``40 * awd / transformer`` Transformer epochs.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/bench_transformer_time.py --rounds 3
"""
import argparse
import statistics
import time

import torch

from lmcourse.config import seed_everything
from lmcourse.course.runs import lesson09 as L9, lesson10 as L10
from lmcourse.networks.models import RNNLM
from lmcourse.networks.transformer import TransformerLM
from lmcourse.training.trainer import Trainer


def one_epoch(build, config, corpus) -> float:
    seed_everything(0)
    model = build()
    model.vocab = corpus.vocab
    start = time.perf_counter()
    Trainer(model, corpus.train, corpus.valid, config).fit()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    shared = L9.shared_settings("cpu")
    corpus = L9.ladder_corpus(L9.ladder_params("cpu"))
    V = len(corpus.vocab)
    awd = dict(L9.rung_settings("AWD recipe", 0, shared), epochs=1)
    tf = dict(L10.transformer_settings("equal parameters", 0, shared, "cpu"), epochs=1)
    quiet = dict(progress=False, live_plot=False)
    runs = {"AWD rung": (lambda: RNNLM(L9.model_config(awd, V)), L9.train_config(awd, **quiet)),
            "Transformer": (lambda: TransformerLM(L10.model_config(tf, V)), L10.train_config(tf, **quiet))}
    seconds = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (build, config) in runs.items():
            seconds[name].append(one_epoch(build, config, corpus))
    median = {name: statistics.median(s) for name, s in seconds.items()}
    for name, s in seconds.items():
        print(f"{name:>12}: {', '.join(f'{x:.2f}' for x in s)} s an epoch (median {median[name]:.2f})")
    ratio = median["AWD rung"] / median["Transformer"]
    print(f"the AWD rung's {shared['epochs']} epochs take as long as {shared['epochs'] * ratio:.1f} Transformer epochs "
          f"(ratio {ratio:.2f})")


if __name__ == "__main__":
    main()
