"""Dynamic evaluation's cost: tokens/s against static evaluation, and against a plain per-segment loop.

Three ways to score the same stream with the same model (a tied 1 x 200 LSTM over a 10k vocabulary,
the course's cpu-scale word model; on CUDA also a 3-layer AWD-LSTM-sized one):

- static: ``RNNLM.score`` (chunks of 2,000 tokens, no gradients);
- ``DynamicEval`` (``rms``, Krause et al. 2018) at segment lengths 5 and 20;
- a plain loop written the way the dynamic-evaluation code is: per segment ``zero_grad``,
  ``backward``, then ``param.data += dW`` for every parameter with the formula spelled out.

All run interleaved in one process (median of the repeats), so the machine's load hits them alike.
The loop and ``DynamicEval`` must give the same log-probabilities (max |difference| printed).

    python benchmarks/bench_dyneval.py [--tokens 3000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lmcourse.adapt.dyneval import DynamicEval, decay_rates  # noqa: E402
from lmcourse.networks.models import RNNLM, LMConfig  # noqa: E402
from lmcourse.vocab import Vocab  # noqa: E402

V = 10_000
LR, DECAY, EPS = 5e-5, 2e-3, 2e-5  # the reference code's defaults at bptt 5, scaled by bptt / 5 below


def build(device, sizes: dict) -> RNNLM:
    torch.manual_seed(0)
    model = RNNLM(LMConfig(V, tie=True, **sizes)).to(device)
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model.eval()


def fake_stats(model: RNNLM) -> dict:
    """RMS gradients of a realistic spread (the timing does not depend on their values)."""
    g = torch.Generator().manual_seed(1)
    return {n: (torch.rand(p.shape, generator=g) * 0.02 + 1e-4).to(p.device) for n, p in model.named_parameters()}


def reference_loop(model: RNNLM, stream: torch.Tensor, stats: dict, lr, decay, eps, bptt) -> torch.Tensor:
    """One segment at a time: zero_grad, backward, ``param.data += dW``, like the reference code."""
    import copy
    model = copy.deepcopy(model)
    model.train()  # dropout is 0 in this model; training mode lets cuDNN differentiate
    params = list(model.parameters())
    names = [n for n, _ in model.named_parameters()]
    data0 = [p.data.clone() for p in params]
    ms = [stats[n] for n in names]
    decrate = [r for r in decay_rates({n: stats[n] for n in names}, decay).values()]
    data = torch.cat([stream.new_full((1,), model.vocab.eos), stream]).view(-1, 1)
    hidden, out, i = None, [], 0
    while i < data.size(0) - 1:
        seq_len = min(bptt, data.size(0) - 1 - i)
        x, y = data[i:i + seq_len], data[i + 1:i + 1 + seq_len].view(-1)
        model.zero_grad()
        o = model(x, hidden)
        hidden = [(h.detach(), c.detach()) for h, c in o.state]
        logp = F.log_softmax(o.logits.view(-1, V), dim=-1)
        out.append(logp.gather(1, y.view(-1, 1)).view(-1).detach())
        F.nll_loss(logp, y).backward()
        for k, p in enumerate(params):
            dW = decay * decrate[k] * (data0[k] - p.data) - lr * p.grad.data / (ms[k] + eps)
            p.data += dW
        i += seq_len
    return torch.cat(out).double().cpu()


def timed(fn, device) -> tuple[float, torch.Tensor]:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, result


def run(label: str, device, sizes: dict, n_tokens: int, repeats: int) -> None:
    model = build(device, sizes)
    stats = fake_stats(model)
    stream = torch.randint(0, V, (n_tokens,), generator=torch.Generator().manual_seed(2)).to(device)
    ways = {"static": lambda: model.score(stream)}
    for bptt in (5, 20):
        f = bptt / 5
        dyn = DynamicEval(model, "rms", lr=LR * f, decay=DECAY * f, eps=EPS, bptt=bptt, stats=stats)
        ways[f"DynamicEval, bptt {bptt}"] = lambda d=dyn: d.score(stream)
        ways[f"reference loop, bptt {bptt}"] = (
            lambda b=bptt, f=f: reference_loop(model, stream, stats, LR * f, DECAY * f, EPS, b))
    for fn in ways.values():  # warm up
        fn()
    times = {name: [] for name in ways}
    results = {}
    for _ in range(repeats):
        for name, fn in ways.items():
            seconds, results[name] = timed(fn, device)
            times[name].append(seconds)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"\n### {label} ({device.type}), {n_tokens:,} tokens, median of {repeats}\n")
    print("| scoring | tokens/s | time per token vs static | vs the reference loop | max abs diff of log p |")
    print("|---|---:|---:|---:|---:|")
    for name in ways:
        speed = n_tokens / med[name]
        vs_static = med[name] / med["static"]
        bptt = name.rsplit(" ", 1)[-1]
        if name.startswith("DynamicEval"):
            ref = f"reference loop, bptt {bptt}"
            faster = f"{med[ref] / med[name]:.2f}x faster"
            diff = f"{float((results[name] - results[ref]).abs().max()):.1e}"
        else:
            faster, diff = "", ""
        print(f"| {name} | {speed:,.0f} | {vs_static:.1f}x | {faster} | {diff} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    run("1 x 200 LSTM, tied, V = 10k", torch.device("cpu"),
        dict(emb_size=200, hidden_size=200, num_layers=1), args.tokens, args.repeats)
    if torch.cuda.is_available():
        cuda = torch.device("cuda")
        run("1 x 200 LSTM, tied, V = 10k", cuda, dict(emb_size=200, hidden_size=200, num_layers=1),
            args.tokens, args.repeats)
        run("AWD-LSTM size: 3 layers 400-1150-1150-400, tied, V = 10k", cuda,
            dict(emb_size=400, hidden_size=1150, num_layers=3), args.tokens, args.repeats)


if __name__ == "__main__":
    main()
