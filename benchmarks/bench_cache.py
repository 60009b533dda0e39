"""The neural cache, vectorised, against a per-token loop written the way awd-lstm-lm's pointer.py is.

Two questions, one run, one torch thread for everything (the ratios then measure vectorisation,
not cores):

1. **Cache evaluation.** Given the model's logits and last-layer states for a stream, score
   ``TOKENS`` positions that each see a full window of 2,000 stored states (V = 10,000, H = 400):
   - ``loop, one-hot``: pointer.py's algorithm — a Python loop over positions; per position a
     matrix-vector product with the stored states, a softmax, the attention times a (window x V)
     one-hot history summed over the window, the linear mixture, the log;
   - ``loop, index_add``: the same loop, the one-hot product replaced by an ``index_add`` (a
     stronger per-token peer);
   - ``vectorised``: :class:`lmcourse.adapt.cache.CacheMemory` scoring chunks of 128 positions
     (``cache.CHUNK``) with one matrix product each, then :func:`lmcourse.adapt.cache.mix_linear`.
   All three give the same log-probabilities (max |difference| printed; target 1e-4).
2. **Overhead over plain evaluation.** ``NeuralCache(model, window=2000).score`` against
   ``model.score`` on the same stream, for a 1 x 400 tied LSTM and for the AWD-LSTM's 3-layer
   400-1150-1150-400 shape (Merity et al. 2018). On the CPU the figure is recorded; the target
   (<= 1.3x) is for a GPU, where those rows run automatically.

    python benchmarks/bench_cache.py [--tokens 500] [--stream 4000] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lmcourse.adapt.cache import CacheMemory, NeuralCache, mix_linear  # noqa: E402
from lmcourse.networks.models import RNNLM, LMConfig, log_softmax  # noqa: E402
from lmcourse.vocab import Vocab  # noqa: E402

V, H, WINDOW = 10_000, 400, 2000
THETA, LAM = 0.662, 0.128  # the awd-lstm-lm code's WikiText-2 pointer settings (any values would do)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, device, repeats: int, warmup: bool = True):
    """(result, median seconds, fastest seconds) over ``repeats`` runs, after one warm-up run if asked."""
    out = fn() if warmup else None
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        out = fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return out, statistics.median(times), min(times)


def stream_data(n: int, device: torch.device):
    """Logits (n, V) and states (n, H) of a random 1 x 400 tied LSTM over random tokens, and the tokens."""
    torch.manual_seed(0)
    model = _model(dict(emb_size=H, hidden_size=H, num_layers=1), device)
    tokens = torch.randint(0, V, (n,), device=device)
    logits, h = zip(*model.stream(tokens))
    return torch.cat(logits), torch.cat(h), tokens


def loop_one_hot(p_vocab, h, y, first: int):
    """pointer.py's way: per position, attention over the window times a one-hot history."""
    one_hot = F.one_hot(y, V).float()                                     # (n, V): the values, as pointer.py stores them
    out = []
    for t in range(first, len(y)):
        keys, values = h[t - WINDOW:t], one_hot[t - WINDOW:t]             # (W, H), (W, V)
        attn = torch.softmax(THETA * torch.mv(keys, h[t]), 0).view(-1, 1)  # (W, 1)
        p_ptr = (attn.expand_as(values) * values).sum(0)                  # (V,)
        p = LAM * p_ptr + (1 - LAM) * p_vocab[t]
        out.append(torch.log(p[y[t]]))
    return torch.stack(out)


def loop_index_add(p_vocab, h, y, first: int):
    """The same loop with the one-hot product replaced by index_add into a (V,) vector."""
    out = []
    for t in range(first, len(y)):
        attn = torch.softmax(THETA * torch.mv(h[t - WINDOW:t], h[t]), 0)   # (W,)
        p_ptr = torch.zeros(V, device=h.device).index_add_(0, y[t - WINDOW:t], attn)
        out.append(torch.log(LAM * p_ptr[y[t]] + (1 - LAM) * p_vocab[t, y[t]]))
    return torch.stack(out)


def vectorised(log_p_vocab, h, y, first: int):
    """The course's cache: the window pre-filled with the first positions, then chunks of 128 (cache.CHUNK)."""
    memory = CacheMemory(WINDOW)
    theta = torch.tensor([THETA], device=h.device)
    memory.store(h[:first], y[:first])
    l_all, l_match = memory.read(h[first:], y[first:], theta)
    lp = log_p_vocab[first:].gather(1, y[first:].view(-1, 1)).squeeze(1)
    return mix_linear(lp, l_all[0], l_match[0], LAM)


def bench_loops(device: torch.device, tokens: int, repeats: int) -> None:
    logits, h, y = stream_data(WINDOW + tokens, device)
    log_p = log_softmax(logits)
    p = log_p.exp()
    peers = [("loop, one-hot (pointer.py)", lambda: loop_one_hot(p, h, y, WINDOW)),
             ("loop, index_add", lambda: loop_index_add(p, h, y, WINDOW)),
             ("vectorised (lmcourse.adapt.cache)", lambda: vectorised(log_p, h, y, WINDOW))]
    results = {}
    for name, fn in peers:
        loop = name.startswith("loop")  # the loops take seconds: one timed run each, no warm-up
        results[name] = _timed(fn, device, 1 if loop else repeats, warmup=not loop)
    ours = results["vectorised (lmcourse.adapt.cache)"]
    print(f"\n### Cache evaluation, {device.type}: {tokens:,} positions, window {WINDOW:,}, V = {V:,}, H = {H}\n")
    print("| implementation | ms per position | positions/s | vectorised is faster by | max abs diff vs vectorised |")
    print("|---|---:|---:|---:|---:|")
    for name, (out, med, _) in results.items():
        diff = (out.double() - ours[0].double()).abs().max().item()
        print(f"| {name} | {1e3 * med / tokens:.3f} | {tokens / med:,.0f} | {med / ours[1]:.1f}x | {diff:.1e} |")


def _model(sizes: dict, device: torch.device) -> RNNLM:
    model = RNNLM(LMConfig(V, tie=True, **sizes)).to(device)
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


def bench_overhead(device: torch.device, tokens: int, repeats: int) -> None:
    print(f"\n### Overhead over plain evaluation, {device.type}: {tokens:,} tokens, window {WINDOW:,}, V = {V:,}\n")
    print("| model | plain score (s) | with cache (s) | cache / plain | cache / plain, fastest runs |")
    print("|---|---:|---:|---:|---:|")
    for label, sizes in [("1 x 400, tied", dict(emb_size=400, hidden_size=400, num_layers=1)),
                         ("3 x 1150, AWD-LSTM shape", dict(emb_size=400, hidden_size=1150, num_layers=3))]:
        torch.manual_seed(0)
        model = _model(sizes, device)
        tokens_ = torch.randint(0, V, (tokens,), device=device)
        cache = NeuralCache(model, theta=THETA, lam=LAM, window=WINDOW)
        times = {"plain": [], "cache": []}
        for i in range(repeats + 1):  # interleaved; the first round warms up
            for name, fn in (("plain", lambda: model.score(tokens_)), ("cache", lambda: cache.score(tokens_))):
                _sync(device)
                start = time.perf_counter()
                fn()
                _sync(device)
                if i:
                    times[name].append(time.perf_counter() - start)
        p, c = statistics.median(times["plain"]), statistics.median(times["cache"])
        print(f"| {label} | {p:.2f} | {c:.2f} | {c / p:.2f}x | {min(times['cache']) / min(times['plain']):.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=500, help="positions scored with a full window")
    parser.add_argument("--stream", type=int, default=4000, help="tokens in the overhead stream")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread; "
          f"devices: {', '.join(d.type for d in devices)}")
    with torch.no_grad():
        for device in devices:
            bench_loops(device, args.tokens, args.repeats)
            bench_overhead(device, args.stream, args.repeats)


if __name__ == "__main__":
    main()
