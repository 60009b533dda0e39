"""The LSTM from its equations (lmcourse.networks.lstm.LSTM) against torch.nn.LSTM, side by side.

Both peers get the same weights and inputs and run alternately inside each repeat, so a busy
machine slows both alike; the table gives the median milliseconds per iteration and the ratio
ours / torch. Rows: forward + backward (training) and forward alone under no_grad (evaluation),
at hidden 200 and 650 (T=35, B=20, 2 layers, input size = hidden size), on the CPU with 2 and 1
threads, and on CUDA when it is there.

    python benchmarks/bench_lstm.py [--repeats 15] [--sizes 200 650] [--threads 2 1]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from lmcourse.networks.lstm import LSTM  # noqa: E402

T, B, LAYERS = 35, 20, 2


def make_peers(H: int, device: torch.device):
    torch.manual_seed(0)
    ref = nn.LSTM(H, H, LAYERS).to(device)
    ours = LSTM(H, H, LAYERS).to(device)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(T, B, H, device=device, requires_grad=True)
    return {"torch": ref, "ours": ours}, x


def one_iteration(model, x, mode: str, device: torch.device) -> float:
    """Seconds for one forward (+ backward) pass."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    if mode == "fwd+bwd":
        out, (h_n, c_n) = model(x)
        (out.sum() + h_n.sum() + c_n.sum()).backward()
    else:
        with torch.no_grad():
            model(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def measure(H: int, device: torch.device, mode: str, repeats: int, warmup: int = 3):
    """Median ms per iteration for each peer, alternating peers inside every repeat."""
    peers, x = make_peers(H, device)
    times = {name: [] for name in peers}
    for r in range(warmup + repeats):
        for name, model in peers.items():
            model.zero_grad(set_to_none=True)
            x.grad = None
            dt = one_iteration(model, x, mode, device)
            if r >= warmup:
                times[name].append(dt)
    return {name: 1e3 * statistics.median(ts) for name, ts in times.items()}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    lines = [f"platform: {platform.platform()}", f"python {platform.python_version()}, torch {torch.__version__}",
             f"cpu: {cpu} ({os.cpu_count()} logical cores), OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}",
             f"default torch threads: {torch.get_num_threads()}"]
    if torch.cuda.is_available():
        lines.append(f"cuda: {torch.cuda.get_device_name(0)}, cuDNN {torch.backends.cudnn.version()}")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--sizes", type=int, nargs="+", default=[200, 650])
    p.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    args = p.parse_args(argv)
    print(machine())
    print(f"T={T}, B={B}, layers={LAYERS}, input size = hidden size; median of {args.repeats} repeats\n")
    header = (f"{'device':<8} {'threads':>7} {'hidden':>6} {'mode':<12} "
              f"{'torch ms':>9} {'ours ms':>9} {'ours/torch':>10}")
    print(header)
    print("-" * len(header))
    runs = [("cpu", th) for th in args.threads]
    if torch.cuda.is_available():
        runs.append(("cuda", torch.get_num_threads()))
    for dev, threads in runs:
        torch.set_num_threads(threads)
        for H in args.sizes:
            for mode in ("fwd+bwd", "fwd only"):
                ms = measure(H, torch.device(dev), mode, args.repeats)
                print(f"{dev:<8} {threads:>7} {H:>6} {mode:<12} {ms['torch']:>9.2f} {ms['ours']:>9.2f} "
                      f"{ms['ours'] / ms['torch']:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
