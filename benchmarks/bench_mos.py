"""The mixture of softmaxes' cost: one training step of an MoS model against the softmax head.

PTB size as in the MoS code's README (Yang et al. 2018; mos code): V = 10,000, embedding 280,
hidden 960, last layer 620, 3 layers, K = 15 experts, batch 12, bptt 70, the paper's dropouts.
Three models share that LSTM and differ only in the head:

- ``softmax``: a linear decoder from the 620-unit last layer (untied: a tied softmax needs 280);
- ``MoS``: :class:`lmcourse.networks.mos.MixtureOfSoftmaxes`, tied, its custom autograd function;
- ``MoS, plain autograd``: the same head computed by :func:`lmcourse.networks.mos.mos_log_probs_reference`.

One step = forward, the loss, backward, clipping at 0.25, an SGD step. The models run interleaved
in one process and the median over repeats is printed with the ratio to the softmax step (target:
MoS at most 3x). Peak memory of one step: on CUDA ``torch.cuda.max_memory_allocated`` above what
the model and its data hold before the step; on the CPU (Linux) the peak resident set over one
step, reset just before it, less the resident set before it, each model in a fresh process. The
(T, B, K, V) logit tensor alone is 70 x 12 x 15 x 10,000 floats = 504 MB (481 MiB).

    python benchmarks/bench_mos.py [--repeats 5] [--warmup 1] [--no-reference]
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import subprocess
import sys
import time
import types

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lmcourse.networks.models import RNNLM, LMConfig  # noqa: E402
from lmcourse.networks.mos import mos_log_probs_reference  # noqa: E402

V, E, H, LAST, LAYERS, K, BATCH, BPTT, LR, CLIP = 10_000, 280, 960, 620, 3, 15, 12, 70, 20.0, 0.25
DROPOUTS = dict(dropout=0.4, dropouth=0.225, dropouti=0.4, dropoute=0.1, wdrop=0.5)  # the MoS README's PTB run
VARIANTS = ("softmax", "MoS", "MoS, plain autograd")


def build(variant: str, device: torch.device) -> RNNLM:
    torch.manual_seed(0)
    sizes = dict(vocab_size=V, emb_size=E, hidden_size=H, num_layers=LAYERS, last_size=LAST, **DROPOUTS)
    if variant == "softmax":
        config = LMConfig(**sizes, tie=False)
    else:
        config = LMConfig(**sizes, tie=True, head="mos", n_experts=K, dropoutl=0.29)
    model = RNNLM(config).to(device)
    if variant == "MoS, plain autograd":
        def forward(head, g):  # the same head, every step left to autograd
            log_pi, h = head.mixture(g)
            return mos_log_probs_reference(h, head.weight, head.bias, log_pi)
        model.head.forward = types.MethodType(forward, model.head)
    return model.train()


def batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, V, (BPTT + 1, BATCH), generator=g).to(device)  # (T+1, B)
    return ids[:-1], ids[1:]


def step(model: RNNLM, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    scores = model(x).logits.reshape(-1, V)  # (T B, V): log-probabilities for MoS, logits for softmax
    log_probs = getattr(model.head, "returns_log_probs", False)
    loss = (F.nll_loss if log_probs else F.cross_entropy)(scores, y.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    optimizer.step()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def times(device: torch.device, variants, repeats: int, warmup: int) -> dict:
    """Seconds per step of each variant, interleaved: {variant: [seconds]}."""
    models = {v: build(v, device) for v in variants}
    optimizers = {v: torch.optim.SGD(m.parameters(), lr=LR) for v, m in models.items()}
    x, y = batch(device)
    out = {v: [] for v in variants}
    for i in range(warmup + repeats):
        for v in variants:
            _sync(device)
            start = time.perf_counter()
            step(models[v], optimizers[v], x, y)
            _sync(device)
            if i >= warmup:
                out[v].append(time.perf_counter() - start)
    return out


def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def peak_bytes(variant: str, device: torch.device) -> int:
    """Memory one step needs beyond the model, its data and its gradients.

    CUDA: the allocator's peak. CPU (Linux): freed heap pages are returned to the system
    (``malloc_trim``), the peak resident set is reset (``/proc/self/clear_refs``), and its
    high-water mark after the step, less the resident set before it, is the step's. Run it in a
    fresh process (:func:`cpu_peak_in_subprocess`): memory an earlier step freed would be reused
    without being counted."""
    model = build(variant, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = batch(device)
    for p in model.parameters():  # gradients exist before the measured step, as in training
        p.grad = torch.zeros_like(p)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step(model, optimizer, x, y)
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident set (VmHWM)
    before = _proc_status_kib("VmRSS")
    step(model, optimizer, x, y)
    return (_proc_status_kib("VmHWM") - before) * 1024


def cpu_peak_in_subprocess(variant: str) -> int:
    """:func:`peak_bytes` on the CPU, measured in a fresh Python process."""
    code = f"import bench_mos as b, torch; print(b.peak_bytes({variant!r}, torch.device('cpu')))"
    path = os.pathsep.join(filter(None, [os.path.dirname(os.path.abspath(__file__)), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": path})
    return int(done.stdout.split()[-1])


def report(device: torch.device, variants, repeats: int, warmup: int) -> None:
    t = times(device, variants, repeats, warmup)
    if device.type == "cuda":
        peaks = {v: peak_bytes(v, device) for v in variants}
    else:
        peaks = {v: cpu_peak_in_subprocess(v) for v in variants}
    base_t, base_m = statistics.median(t["softmax"]), peaks["softmax"]
    print(f"\n{device.type}: median of {repeats} steps (after {warmup} warm-up), peak memory of one step")
    print(f"{'head':<22}{'ms/step':>10}{'x softmax':>11}{'tokens/s':>10}{'peak MiB':>10}{'x softmax':>11}")
    for v in variants:
        s = statistics.median(t[v])
        print(f"{v:<22}{s * 1e3:>10.0f}{s / base_t:>10.2f}x{BATCH * BPTT / s:>10.0f}"
              f"{peaks[v] / 2**20:>10.0f}{peaks[v] / base_m:>10.2f}x")
    if "MoS, plain autograd" in variants:
        plain = "MoS, plain autograd"
        print(f"MoS: lmcourse.networks.mos vs plain autograd: {statistics.median(t[plain]) / statistics.median(t['MoS']):.2f}x "
              f"faster, {peaks[plain] / peaks['MoS']:.2f}x less peak memory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-reference", action="store_true", help="leave out the plain-autograd MoS")
    args = parser.parse_args()
    variants = VARIANTS[:2] if args.no_reference else VARIANTS
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; PTB size: V={V}, E={E}, H={H}, "
          f"last={LAST}, {LAYERS} layers, K={K}, batch {BATCH}, bptt {BPTT}")
    print(f"the (T, B, K, V) logit tensor: {BPTT * BATCH * K * V * 4 / 2**20:.0f} MiB in float32")
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        report(device, variants, args.repeats, args.warmup)


if __name__ == "__main__":
    main()
