"""bfloat16 autocast for a training step (``TrainConfig.bf16``) that works on every device.

Under ``torch.autocast(dtype=torch.bfloat16)`` the matrix products of the forward pass run in bfloat16
and the softmaxes and losses in float32. On CUDA, and on a CPU whose kernels take bfloat16
(:func:`lmcourse.config.cpu_bf16_kernels`), the whole forward pass runs so. On a CPU without them
(AVX2 and no AVX-512, or torch limited to AVX2 by ``ONEDNN_MAX_CPU_ISA`` / ``ATEN_CPU_CAPABILITY``),
torch's fused LSTM (``nn.LSTM``) has no bfloat16 kernel under autocast: oneDNN cannot build its
bfloat16 LSTM primitive there. So each ``nn.LSTM`` runs in float32 outside autocast (its inputs and
state cast to float32), and everything else stays under it: the head's and the from-the-equations
cell's matrix products are still bfloat16. Which of the two applies is decided from what torch
reports, before the first step, never by catching the kernel's error.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn as nn

from ..config import cpu_bf16_kernels, cpu_kernels

__all__ = ["lstm_in_float32", "fallback_note", "bf16_autocast"]


def lstm_in_float32(device: torch.device) -> bool:
    """True where bfloat16 autocast must leave torch's fused LSTM out: a CPU whose kernels lack bfloat16."""
    return torch.device(device).type == "cpu" and not cpu_bf16_kernels()


def fallback_note() -> str:
    """The one sentence a run with ``bf16`` prints where the LSTM stays in float32."""
    return (f"bf16: this CPU's kernels have no bfloat16 LSTM (torch reports {cpu_kernels()}), so the LSTM layers "
            "run in float32 and the rest of the forward pass under bfloat16 autocast.")


def _float32(value):
    """``value`` with every floating tensor in it (nested in tuples, lists and dicts too) as float32."""
    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_float32(v) for v in value)
    if isinstance(value, dict):
        return {k: _float32(v) for k, v in value.items()}
    return value


@contextmanager
def bf16_autocast(model: nn.Module, device: torch.device, enabled: bool = True):
    """The forward pass of one training step under bfloat16 autocast on ``device`` (nothing when not
    ``enabled``), with every ``nn.LSTM`` of ``model`` run in float32 outside it where
    :func:`lstm_in_float32` says so (hooks that live for this block only)."""
    device = torch.device(device)
    if not enabled:
        yield
        return
    hooks, before = [], []
    if lstm_in_float32(device):
        def leave_autocast(module, args, kwargs):  # before each nn.LSTM: autocast off, its inputs in float32
            before.append(torch.is_autocast_enabled(device.type))
            torch.set_autocast_enabled(device.type, False)
            return _float32(args), _float32(kwargs)

        def back_to_autocast(module, args, output):  # after it: autocast as it was
            torch.set_autocast_enabled(device.type, before.pop())

        for module in model.modules():
            if isinstance(module, nn.LSTM):
                hooks += [module.register_forward_pre_hook(leave_autocast, with_kwargs=True),
                          module.register_forward_hook(back_to_autocast)]
    try:
        with torch.autocast(device.type, dtype=torch.bfloat16):  # restores autocast's state on the way out
            yield
    finally:
        for hook in hooks:
            hook.remove()
