"""The trainer's overhead: ``Trainer.fit`` against a bare loop on the same model and batches.

The bare loop is the least a truncated-BPTT step needs: forward from the detached state,
cross-entropy, backward, gradient clipping, an SGD step. The trainer adds its bookkeeping (loss
kept on the device, divergence checks, callbacks, the best-weights snapshot) and two validation
passes over a small stream (the starting weights, then the epoch's end). A third run reads each
batch in two sub-batches of 10 columns (``small_batch_size``, gradient accumulation as in the MoS
code, Yang et al. 2018): the price of the smaller memory peak. All three train the pytorch/examples
small model (V = 10k, 2 x 200, bptt 35, batch 20; pytorch/examples 2017) for the same number of
batches, from the same initial weights, on the run's device (the CPU with 2 threads here, the GPU
when there is one); the order of the runs rotates so the machine's load affects all alike, and the
median of the repeats is reported (target: overhead < 5%).

Data: PTB when ``LMCOURSE_DATA`` (or ../shared/data) holds it, else a random stream over 10k types.

    python benchmarks/bench_trainer.py [--batches 200] [--repeats 3]
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from pathlib import Path
from typing import Optional

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lmcourse.config import device  # noqa: E402
from lmcourse.corpora.data import batchify, bptt_batches, load_corpus  # noqa: E402
from lmcourse.networks.models import RNNLM, LMConfig  # noqa: E402
from lmcourse.training.trainer import TrainConfig, Trainer  # noqa: E402

V, E, H, L, BPTT, BATCH, LR, CLIP = 10_000, 200, 200, 2, 35, 20, 20.0, 0.25


def corpus_streams(batches: int):
    """(train, valid, label): PTB's when it is on disk, else random ids."""
    folder = Path(os.environ.get("LMCOURSE_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    if (folder / "ptb" / "train.txt").is_file():
        corpus = load_corpus("ptb", data_dir=folder, cache=False)
        return corpus.train, corpus.valid[:20 * BPTT * 10], "PTB"
    g = torch.Generator().manual_seed(0)
    n = (batches * BPTT + 1) * BATCH
    return torch.randint(0, V, (n,), generator=g), torch.randint(0, V, (20 * BPTT * 10,), generator=g), "random"


def bare_loop(model: RNNLM, train: torch.Tensor, batches: int) -> float:
    """Seconds for ``batches`` plain truncated-BPTT SGD steps."""
    start = time.perf_counter()
    model.to(device())
    source = batchify(train, BATCH).to(device())  # (T, B)
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=LR)
    model.train()
    state = model.init_state(BATCH)
    total = torch.zeros(())
    for i, (x, y) in enumerate(bptt_batches(source, BPTT)):
        if i == batches:
            break
        out = model(x, model.detach_state(state))
        state = out.state
        loss = F.cross_entropy(out.logits.reshape(-1, V), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        optimizer.step()
        total += loss.detach()
    float(total)
    return time.perf_counter() - start


def trainer_run(model: RNNLM, train: torch.Tensor, valid: torch.Tensor, batches: int,
                small: Optional[int] = None) -> tuple[float, float]:
    """Seconds for ``Trainer.fit`` over the same batches (one epoch, validation included), and its tokens/s."""
    config = TrainConfig(epochs=1, batch_size=BATCH, bptt=BPTT, lr=LR, clip=CLIP, max_batches=batches,
                         small_batch_size=small, progress=False, live_plot=False)
    start = time.perf_counter()
    history = Trainer(model, train, valid, config).fit()
    return time.perf_counter() - start, history.rows[0]["tokens_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)
    train, valid, label = corpus_streams(args.batches)
    torch.manual_seed(0)
    initial = RNNLM(LMConfig(vocab_size=V, emb_size=E, hidden_size=H, num_layers=L))
    tokens = args.batches * BPTT * BATCH
    print(f"torch {torch.__version__}, {device().type}, {torch.get_num_threads()} threads, data {label}, V={V}, "
          f"{L}x{H}, bptt {BPTT}, batch {BATCH}, {args.batches} batches ({tokens} tokens), median of {args.repeats}")
    bare_loop(copy.deepcopy(initial), train, 5)  # warm-up
    seconds, train_tps = {"bare": [], "fit": [], "small": []}, {"fit": [], "small": []}
    for repeat in range(args.repeats):
        order = ("bare", "fit", "small")
        for name in order[repeat % 3:] + order[:repeat % 3]:  # rotate who goes first
            if name == "bare":
                seconds["bare"].append(bare_loop(copy.deepcopy(initial), train, args.batches))
                continue
            small = BATCH // 2 if name == "small" else None
            s, tps = trainer_run(copy.deepcopy(initial), train, valid, args.batches, small)
            seconds[name].append(s)
            train_tps[name].append(tps)
    bare, fit, small = (statistics.median(seconds[k]) for k in ("bare", "fit", "small"))
    fit_tps, small_tps = statistics.median(train_tps["fit"]), statistics.median(train_tps["small"])
    print(f"{'run':<38}{'seconds':>9}{'tokens/s':>11}")
    print(f"{'bare loop':<38}{bare:>9.2f}{tokens / bare:>11.0f}")
    print(f"{'Trainer.fit (with 2 validations)':<38}{fit:>9.2f}{tokens / fit:>11.0f}")
    print(f"{'Trainer, training part':<38}{'':>9}{fit_tps:>11.0f}")
    print(f"{'Trainer, small_batch_size=10 (2 x 10)':<38}{small:>9.2f}{tokens / small:>11.0f}")
    print(f"overhead of Trainer.fit: {100 * (fit / bare - 1):+.1f}%  "
          f"(training part alone: {100 * (tokens / bare / fit_tps - 1):+.1f}%; "
          f"fastest runs: {100 * (min(seconds['fit']) / min(seconds['bare']) - 1):+.1f}%; target < 5%)")
    print(f"gradient accumulation over 2 sub-batches: training part {fit_tps / small_tps:.2f}x the time of one batch")

if __name__ == "__main__":
    main()
