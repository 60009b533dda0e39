"""WeightDrop's cost: a weight-dropped nn.LSTM step against the plain nn.LSTM step.

One step = forward over a (T, B, H) batch + backward of the summed output, the unit of work of a
training loop. Both variants run interleaved in the same process, so the machine's load affects
them alike; the median over repeats is reported with the ratio (target: at most 1.2x), and the
ratio of the fastest repeats beside it, which is steadier on a shared machine.

    python benchmarks/bench_weightdrop.py [--repeats 15] [--warmup 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from lmcourse.networks.dropout import WeightDrop  # noqa: E402

SIZES = [(200, 35), (200, 70), (650, 35), (650, 70)]  # (H, T): the small and medium PTB models
BATCH = 20
P = 0.5  # AWD-LSTM's wdrop (Merity et al. 2018; awd-lstm-lm code)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step(module: nn.Module, x: torch.Tensor) -> None:
    out, _ = module(x)  # (T, B, H)
    out.sum().backward()


def _time_once(module: nn.Module, x: torch.Tensor, device: torch.device) -> float:
    module.zero_grad(set_to_none=True)
    _sync(device)
    start = time.perf_counter()
    _step(module, x)
    _sync(device)
    return (time.perf_counter() - start) * 1e3


def compare(H: int, T: int, device: torch.device, repeats: int, warmup: int) -> dict:
    """Milliseconds per step of the plain and the weight-dropped LSTM, measured interleaved."""
    torch.manual_seed(0)
    plain = nn.LSTM(H, H).to(device)
    dropped = WeightDrop(nn.LSTM(H, H).to(device), P)
    x = torch.randn(T, BATCH, H, device=device)
    times = {"plain": [], "dropped": []}
    for i in range(warmup + repeats):
        for name, module in (("plain", plain), ("dropped", dropped)):
            ms = _time_once(module, x, device)
            if i >= warmup:
                times[name].append(ms)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, B={BATCH}, p={P}, "
          f"median of {args.repeats} forward+backward steps")
    print(f"{'device':<7}{'H':>6}{'T':>5}{'nn.LSTM ms':>12}{'WeightDrop ms':>15}{'ratio':>8}{'ratio of mins':>15}")
    for device in devices:
        for H, T in SIZES:
            times = compare(H, T, device, args.repeats, args.warmup)
            plain, dropped = statistics.median(times["plain"]), statistics.median(times["dropped"])
            fastest = min(times["dropped"]) / min(times["plain"])
            print(f"{device.type:<7}{H:>6}{T:>5}{plain:>12.2f}{dropped:>15.2f}"
                  f"{dropped / plain:>7.2f}x{fastest:>14.2f}x")


if __name__ == "__main__":
    main()
