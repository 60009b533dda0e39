"""Where the softmax bottleneck binds a trained model: the measurements behind lessons 05 and 06.

Everything runs on the CPU with one torch thread, on the lookup-rich variant of the embedded corpus
(:func:`lmcourse.course.rank_runs.lookup_rich`), with the models and training of
:mod:`lmcourse.course.rank_runs`. Three parts:

1. ``fit``: softmax models of several dimensions d, trained; each one's mean KL to the oracle at the
   lookup positions of the test text, beside the best softmax of dimension d fitted directly to the
   oracle's rows there (:func:`lmcourse.networks.bottleneck.fit_softmax`). Target: every trained
   model within a factor of 2 of its fit wherever d + 1 < rank.
2. ``mos``: a softmax and a mixture of softmaxes of the same d, several seeds each; perplexity
   overall and at the lookups (mean and sd over seeds), the ratio, and the numerical rank of each
   model's log-probabilities at the lookup contexts. Targets: MoS lookup perplexity <= 0.8 x the
   softmax's, MoS lower overall, both beyond the seeds' spread (max of one < min of the other); MoS
   rank > d + 1, softmax rank <= d + 1 (with the value columns only, and row and column means removed).
3. ``old`` (only when asked): the setting the lessons used before, a tied 2 x 256 LSTM with d = 32
   trained one epoch with SGD at rate 20 on the default embedded corpus; its lookup KL against the
   best rank-32 fit (optimisation, not rank, limits it).

    python benchmarks/bench_rank_regime.py [--parts fit mos old] [--dims 2 4 8] [--d 4] [--experts 4]
           [--seeds 0 1 2] [--epochs 3] [--lr 0.02] [--hidden 128] [--latent linear|tanh]
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from lmcourse.corpora import embedded  # noqa: E402
from lmcourse.corpora.data import load_corpus  # noqa: E402
from lmcourse.corpora.oracle import Oracle  # noqa: E402
from lmcourse.networks import bottleneck as bn  # noqa: E402
from lmcourse.course import rank_runs  # noqa: E402


def lookup_matrices(oracle, tokens):
    """The lookup positions of ``tokens``, the oracle's rows there, and the value columns."""
    pos = bn.lookup_positions(oracle, tokens)
    rows = bn.oracle_rows(oracle, tokens, pos)
    return pos, rows, bn.support(rows)


def group_ppl(logp, pos):
    inside = torch.zeros(len(logp), dtype=torch.bool)
    inside[pos] = True
    return {"all": math.exp(-logp.mean().item()), "lookup": math.exp(-logp[inside].mean().item()),
            "other": math.exp(-logp[~inside].mean().item())}


def training(args, seed):
    changes = {k: v for k, v in (("lr", args.lr), ("decay_after", args.decay_after)) if v is not None}
    return rank_runs.train_config(args.epochs, seed=seed, progress=False, **changes)


def part_fit(args, corpus, oracle, test, pos, rows, keep):
    print(f"\n## trained softmax models against the best fit of their d (test lookups: {len(pos)})\n")
    print("| d | trained KL (nats) | best rank-d fit KL | ratio | value mass | train time (s) |")
    print("|---:|---:|---:|---:|---:|---:|")
    keys, counts = np.unique(oracle.lex.key_index[test[pos - 1].numpy()], return_counts=True)
    table = bn.lookup_log_probs(oracle.params)                      # the distinct rows, weighted as in the text
    for d in args.dims:
        start = time.perf_counter()
        config = rank_runs.model_config(len(corpus.vocab), d, hidden_size=args.hidden)
        run = rank_runs.train(f"bench-softmax-d{d}", corpus, config, training(args, 0), args.valid_tokens,
                              plot=False, retrain=True)
        seconds = time.perf_counter() - start
        model_rows = bn.model_rows(run.model, test, pos)
        kl = float(bn.kl_rows(rows, model_rows).mean())
        fit = bn.fit_softmax(table[keys], d, max_iter=300, weights=torch.as_tensor(counts)).kl
        mass = float(model_rows[:, keep].exp().sum(1).mean())
        print(f"| {d} | {kl:.3f} | {fit:.3f} | {kl / fit:.2f} | {mass:.3f} | {seconds:.0f} |", flush=True)


def part_mos(args, corpus, oracle, test, pos, rows, keep):
    print(f"\n## softmax vs MoS (K = {args.experts}), d = {args.d}, seeds {args.seeds}\n")
    oracle_ppl = group_ppl(oracle.score(test), pos)
    res = {}
    for name, k in (("softmax", 1), ("mos", args.experts)):
        for seed in args.seeds:
            start = time.perf_counter()
            config = rank_runs.model_config(len(corpus.vocab), args.d, n_experts=k, hidden_size=args.hidden,
                                            latent=args.latent)
            run = rank_runs.train(f"bench-{name}-d{args.d}-s{seed}", corpus, config,
                                  training(args, seed), args.valid_tokens, plot=False,
                                  retrain=True)
            seconds = time.perf_counter() - start
            ppl = group_ppl(run.model.score(test), pos)
            R = bn.model_rows(run.model, test, pos)[:, keep]
            ranks = (bn.numerical_rank(R), bn.min_softmax_dim(R))
            res.setdefault(name, []).append((ppl, ranks, seconds))
            print(f"{name} seed {seed}: all {ppl['all']:.2f} lookup {ppl['lookup']:.2f} other {ppl['other']:.2f}; "
                  f"rank {ranks[0]}, smallest exact d {ranks[1]}; {seconds:.0f} s", flush=True)
    print(f"\noracle: all {oracle_ppl['all']:.2f} lookup {oracle_ppl['lookup']:.2f}\n")
    print("| model | all (mean ± sd) | lookup (mean ± sd) | other | rank | smallest exact d | s / run |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rs in res.items():
        cell = lambda g: (f"{statistics.mean(r[0][g] for r in rs):.2f} ± "  # noqa: E731
                          f"{statistics.stdev(r[0][g] for r in rs) if len(rs) > 1 else 0:.2f}")
        print(f"| {name} | {cell('all')} | {cell('lookup')} | {cell('other')} | "
              f"{'/'.join(str(r[1][0]) for r in rs)} | {'/'.join(str(r[1][1]) for r in rs)} | "
              f"{statistics.mean(r[2] for r in rs):.0f} |")
    s, m = res["softmax"], res["mos"]
    for g in ("all", "lookup"):
        ratio = statistics.mean(r[0][g] for r in m) / statistics.mean(r[0][g] for r in s)
        apart = max(r[0][g] for r in m) < min(r[0][g] for r in s)
        print(f"{g}: MoS / softmax = {ratio:.3f}; every MoS seed below every softmax seed: {apart}")


def part_old(args):
    from lmcourse.networks.models import LMConfig, RNNLM
    from lmcourse.training.trainer import TrainConfig, Trainer
    from lmcourse.config import seed_everything

    corpus = load_corpus("embedded")
    oracle = Oracle(corpus.vocab)
    text = corpus.valid[:40_000]
    pos, rows, keep = lookup_matrices(oracle, text)
    seed_everything(0)
    model = RNNLM(LMConfig(vocab_size=len(corpus.vocab), emb_size=32, hidden_size=256, num_layers=2, tie=True))
    model.vocab = corpus.vocab
    start = time.perf_counter()
    Trainer(model, corpus.train, corpus.valid, TrainConfig(epochs=1, batch_size=64, bptt=35, lr=20.0, clip=0.25,
                                                           progress=False, live_plot=False)).fit()
    R = bn.model_rows(model, text, pos)
    kl = float(bn.kl_rows(rows, R).mean())
    fit = bn.fit_softmax(rows[:, keep], 32, max_iter=300).kl
    print(f"\n## the old setting: d = 32 tied, one epoch of SGD at rate 20 on the default corpus "
          f"({time.perf_counter() - start:.0f} s)\n")
    per_key = len(bn.lookup_positions(oracle, corpus.train)) / len(bn.lookup_log_probs())
    print(f"lookup KL to the oracle {kl:.3f} nats; best rank-32 fit {fit:.3f}; value mass "
          f"{float(R[:, keep].exp().sum(1).mean()):.3f}; {per_key:.0f} lookups per key in the training text")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="+", default=["fit", "mos"], choices=["fit", "mos", "old"])
    ap.add_argument("--dims", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--d", type=int, default=4)
    ap.add_argument("--experts", type=int, default=4)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, default=None, help="Adam's rate (default: rank_runs.train_config's)")
    ap.add_argument("--hidden", type=int, default=128, help="LSTM units")
    ap.add_argument("--latent", default="linear", choices=["linear", "tanh"], help="the mixture's latent contexts")
    ap.add_argument("--decay-after", type=int, default=None, help="the epoch after which the rate drops")
    ap.add_argument("--train-tokens", type=int, default=300_000)
    ap.add_argument("--eval-tokens", type=int, default=40_000)
    ap.add_argument("--valid-tokens", type=int, default=10_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if "old" in args.parts:
        part_old(args)
    params = rank_runs.lookup_rich(args.train_tokens, args.eval_tokens)
    corpus = load_corpus(embedded.ensure(params=params))
    oracle = Oracle(corpus.vocab, params)
    test = corpus.test
    pos, rows, keep = lookup_matrices(oracle, test)
    print(f"{corpus}; table rank {bn.numerical_rank(bn.lookup_log_probs(params))}")
    if "fit" in args.parts:
        part_fit(args, corpus, oracle, test, pos, rows, keep)
    if "mos" in args.parts:
        part_mos(args, corpus, oracle, test, pos, rows, keep)


if __name__ == "__main__":
    main()
