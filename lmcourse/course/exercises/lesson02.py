r"""Lesson 02 exercises: an LSTM cell variant, the shape of the training batches, the forget bias.

- ``02.cifg``: the LSTM with coupled input and forget gates (Greff et al. 2017),
  :math:`c_t = f_t \odot c_{t-1} + (1 - f_t) \odot g_t`, :math:`h_t = o_t \odot \tanh(c_t)`, with the
  gate blocks stacked in the order (f, g, o).
- ``02.batches``: for a stream of 1,000 tokens, ``batchify`` into 16 columns and windows of 35.
- ``02.forget-bias``: the smallest forget-gate bias on a grid for which the gradient survives 50 steps.
- ``02.forget-bias-why``: the reason behind the exercise's answer, one letter of 3.
"""
from __future__ import annotations

import torch

from ...corpora.data import batchify, bptt_batches
from ...networks.gradflow import grad_norm_vs_lag
from .registry import Wrong, exercise, multiple_choice

STREAM, COLUMNS, BPTT = 1_000, 16, 35  # exercise 02.batches
LAG, RATIO, BIASES = 50, 1e-3, (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)  # exercise 02.forget-bias


def cifg_reference(x_t, h_prev, c_prev, W_ih, W_hh, b):
    """One step of the coupled-gate LSTM.  (B, I), (B, H), (B, H) -> (B, H), (B, H)"""
    z_f, z_g, z_o = (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(3, dim=1)  # each (B, H)
    f_t, g_t, o_t = z_f.sigmoid(), z_g.tanh(), z_o.sigmoid()
    c_t = f_t * c_prev + (1 - f_t) * g_t  # (B, H)
    return o_t * c_t.tanh(), c_t


def _cifg_inputs(seed: int, B: int = 3, I: int = 4, H: int = 5):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    return r(B, I), r(B, H), r(B, H), r(3 * H, I), r(3 * H, H), r(3 * H)


@exercise("02.cifg", hint="start from the LSTM cell you wrote above: how many gates are left once the input gate is "
                          "tied to the forget gate, so how many blocks does z split into? What plays the input "
                          "gate's part in c_t?")
def check_cifg(answer) -> str:
    for seed in (0, 1):
        args = _cifg_inputs(seed)
        want_h, want_c = cifg_reference(*args)
        out = answer(*[a.clone() for a in args])
        if not (isinstance(out, tuple) and len(out) == 2):
            raise Wrong("return the pair (h_t, c_t).")
        h_t, c_t = (torch.as_tensor(o).double() for o in out)
        if h_t.shape != want_h.shape or c_t.shape != want_c.shape:
            raise Wrong(f"h_t and c_t should both have shape {tuple(want_h.shape)} (B, d_h), got "
                        f"{tuple(h_t.shape)} and {tuple(c_t.shape)}.")
        if not torch.allclose(c_t, want_c, atol=1e-10):
            x_t, h_prev, c_prev, W_ih, W_hh, b = args
            z_f, z_g, _ = (x_t @ W_ih.T + h_prev @ W_hh.T + b).chunk(3, dim=1)
            f_t, g_t = z_f.sigmoid(), z_g.tanh()
            if torch.allclose(c_t, f_t * c_prev + f_t * g_t, atol=1e-10):
                raise Wrong("the new content is scaled by f_t; in the coupled cell it is scaled by 1 - f_t, "
                            "so what is forgotten is replaced.")
            raise Wrong("c_t differs from f_t * c_prev + (1 - f_t) * g_t: check the gate order (f, g, o) "
                        "and which gate uses tanh.")
        if not torch.allclose(h_t, want_h, atol=1e-10):
            if torch.allclose(h_t, want_h / want_c.tanh() * want_c, atol=1e-10):
                raise Wrong("h_t must show the squashed cell, o_t * tanh(c_t), not o_t * c_t.")
            raise Wrong("c_t is right but h_t is not: h_t = o_t * tanh(c_t), with o_t the third block.")
    return "three gates instead of four: a quarter fewer weights, and the cell can only replace what it forgets."


def batches_reference(n: int = STREAM, columns: int = COLUMNS, bptt: int = BPTT) -> tuple:
    """(rows of batchify, number of windows, length of the last window), from the package."""
    source = batchify(torch.arange(n), columns)  # (rows, columns)
    windows = [x for x, _ in bptt_batches(source, bptt)]
    return source.size(0), len(windows), windows[-1].size(0)


@exercise("02.batches", hint="How many whole rows of 16 columns fit in 1,000 tokens? The targets are the inputs "
                             "shifted by one row: how many rows does that leave for the inputs, and how do windows "
                             "of 35 cut them?", predicts=lambda: batches_reference())
def check_batches(answer) -> str:
    rows, windows, last = batches_reference()
    if not (isinstance(answer, (tuple, list)) and len(answer) == 3):
        raise Wrong("give three whole numbers: (rows, windows, length of the last window).")
    a_rows, a_windows, a_last = answer
    if a_rows != rows:
        raise Wrong(f"{a_rows} rows is not it: each of the {COLUMNS} columns is a contiguous piece of "
                    f"floor({STREAM:,} / {COLUMNS}) tokens; the {STREAM % COLUMNS} left over are dropped.")
    if (a_windows, a_last) != (windows, last):
        raise Wrong(f"the rows are right, but the windows are not: the targets are the next row, so the inputs "
                    f"cover rows 0 .. {rows - 2} only, {rows - 1} rows cut into windows of {BPTT}.")
    return (f"{rows} rows of {COLUMNS} columns, read in {windows} windows ({BPTT} and {last} rows): the state "
            "is carried from one window to the next, the gradient is not.")


def forget_bias_reference() -> float:
    """The smallest bias in BIASES with |dL/dh| at lag LAG at least RATIO times |dL/dh| at lag 0."""
    for b in BIASES:
        _, g = grad_norm_vs_lag("lstm", hidden_size=32, T=LAG + 1, seed=0, forget_bias=b)
        if g[LAG] >= RATIO * g[0]:
            return b
    raise AssertionError("no bias on the grid reaches the ratio")


@exercise("02.forget-bias", hint="grad_norm_vs_lag takes forget_bias as an argument: going up the grid from 0, which "
                                 "is the first bias whose norm at lag 50 is at least a thousandth of its norm at lag 0?")
def check_forget_bias(answer) -> str:
    value = float(answer)
    best = forget_bias_reference()
    if value < best:
        raise Wrong(f"with b_f = {value:g} the gradient 50 steps back is below a thousandth of its size at lag 0: "
                    "raise the bias.")
    if value > best:
        raise Wrong(f"b_f = {value:g} works, but a smaller bias on the grid already does: find the smallest.")
    return (f"b_f = {best:g} keeps f_t near sigma({best:g}) = {torch.tensor(best).sigmoid():.2f} at the start, "
            "so the product of forget gates shrinks slowly; training can still move it.")


# 02.forget-bias-why: the lesson lists 3 reasons; what each wrong one misses
_WHY_NOT_FORGET_BIAS_WHY = {
    "b": "the gradient along the cell is multiplied by f_t at each step, and a sigmoid never exceeds 1: "
         "what does b_f do to that factor?",
    "c": "b_f is the bias of the forget gate only: which gate multiplies the gradient as it travels back "
         "along c_t?",
}


multiple_choice("02.forget-bias-why", right="a", why_not=_WHY_NOT_FORGET_BIAS_WHY,
                hint="write dc_t / dc_{t-1} for the LSTM cell with the input path held fixed: which "
                "gate is it, and what is sigma(b_f) at b_f = 0 and at b_f = 3?",
                explanation="f_t near 1 makes dc_t / dc_{t-1} near 1, so the gradient survives; the price is a default of "
                "remembering, which a unit that should forget quickly has to unlearn.")
