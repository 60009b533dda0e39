"""Dynamic evaluation's memory over a long stream: the peak resident set must not grow with its length.

``DynamicEval.score`` reads the stream segment by segment, takes one gradient per segment and
updates the weights in place. What it must keep is the model, its adapted copy and one (N,) output;
nothing per segment. Each row scores a stream of N random tokens in a fresh process, after a short
warm-up stream (so the adapted copy and one segment's working memory already exist), and prints the
process's peak resident set during ``score`` and its growth over the resident set just before it.
Flat means the 200k peak is within 10% of the 20k one; the growth column shows what the longer
stream added, of which the (N,) float64 output is 8 bytes a token (1.5 MB at 200k).

The model is a 1 x 32 LSTM over a 10k vocabulary with the ``rms`` update (the memory per segment
does not depend on the width, and a narrow model reads 200k tokens in a few minutes). The plain
model's ``score`` is the reference row.

    python benchmarks/bench_dyneval_memory.py [--tokens 20000 200000]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

V, WIDTH, WARM_UP = 10_000, 32, 2_000


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def measure(kind: str, n_tokens: int) -> dict:
    """Peak resident-set growth of one ``score`` of ``n_tokens`` tokens (run it in a fresh process)."""
    import lmcourse  # noqa: F401  (sets the allocator's mmap threshold, as in every lesson)
    import torch

    from lmcourse.adapt.dyneval import DynamicEval
    from lmcourse.networks.models import RNNLM, LMConfig
    from lmcourse.vocab import Vocab

    torch.manual_seed(0)
    model = RNNLM(LMConfig(V, emb_size=WIDTH, hidden_size=WIDTH, num_layers=1, tie=True)).eval()
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    g = torch.Generator().manual_seed(1)
    stats = {name: torch.rand(p.shape, generator=g) * 0.02 + 1e-4 for name, p in model.named_parameters()}
    scorer = DynamicEval(model, "rms", stats=stats, bptt=5) if kind == "DynamicEval" else model
    stream = torch.randint(0, V, (n_tokens,), generator=g)
    scorer.score(stream[:WARM_UP])  # the adapted copy and a segment's working memory: made before the baseline
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident set (VmHWM) to the resident set now
    before = _status_kib("VmRSS")
    start = time.perf_counter()
    logp = scorer.score(stream)
    seconds = time.perf_counter() - start
    assert logp.shape == (n_tokens,)
    peak = _status_kib("VmHWM")
    return {"peak_mb": peak / 1024, "growth_mb": (peak - before) / 1024, "tokens_per_s": n_tokens / seconds}


def in_subprocess(kind: str, n_tokens: int) -> dict:
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import json, bench_dyneval_memory as b; "
            f"print(json.dumps(b.measure({kind!r}, {n_tokens})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[20_000, 200_000])
    args = parser.parse_args()
    import torch
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; 1 x {WIDTH} LSTM, tied, V = {V:,}, "
          f"rms, segments of 5; each row a fresh process")
    print(f"{'scoring':<14}{'tokens':>9}{'peak RSS MB':>13}{'growth MB':>11}{'growth B/token':>16}"
          f"{'tokens/s':>10}{'peak / first':>14}")
    for kind in ("DynamicEval", "RNNLM"):
        first = None
        for n in args.tokens:
            r = in_subprocess(kind, n)
            first = first or r["peak_mb"]
            print(f"{kind:<14}{n:>9,}{r['peak_mb']:>13.1f}{r['growth_mb']:>11.1f}{r['growth_mb'] * 2 ** 20 / n:>16.1f}"
                  f"{r['tokens_per_s']:>10,.0f}{r['peak_mb'] / first:>13.2f}x", flush=True)


if __name__ == "__main__":
    main()
