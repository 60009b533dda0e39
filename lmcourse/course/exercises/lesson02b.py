r"""Lesson 02b exercises: sampling temperature, a word model in bits per character, the forget gates, early stopping.

- ``02b.temperature``: :math:`p_\tau(x) = \operatorname{softmax}(\log p(x) / \tau)`, computed in log space.
- ``02b.word-bits``: a word model of perplexity :math:`P` over :math:`N` words and :math:`C` characters
  spends :math:`N \log_2 P / C` bits per character.
- ``02b.forget-share``: the share of an LSTM layer's forget-gate activations above a threshold, and
  the number of steps :math:`\ell` after which a constant gate :math:`f` keeps :math:`f^\ell < 1/2`.
- ``02b.early-stop``: with validation perplexities :math:`v_1, v_2, \dots` and patience :math:`p`, training
  stops after the first epoch :math:`e` with :math:`e - b_e \ge p`, where :math:`b_e` is the best epoch so far
  (the first strict minimum of :math:`v_1 \dots v_e`), and keeps epoch :math:`b_e`.
"""
from __future__ import annotations

import math

import torch

from ...networks.gradflow import unroll
from .registry import Wrong, exercise

TAUS = (0.02, 0.5, 1.0, 2.0)  # exercise 02b.temperature
HALF_LIFE_GATE = 0.9  # exercise 02b.forget-share: the gate whose half-life is asked for


def temperature_reference(log_p: torch.Tensor, tau: float) -> torch.Tensor:
    """:math:`p_\\tau = \\operatorname{softmax}(\\log p / \\tau)`.  (B, V) -> (B, V)"""
    return torch.softmax(log_p.double() / tau, dim=-1)


@exercise("02b.temperature", hint="a temperature rescales the log-probabilities before they are normalised again: which way "
                                  "makes a small tau sharpen the distribution? And what keeps exp() finite when tau is tiny?")
def check_temperature(answer) -> str:
    g = torch.Generator().manual_seed(0)
    log_p = torch.log_softmax(4 * torch.randn(3, 9, generator=g, dtype=torch.float64), dim=-1)  # (3, 9)
    for tau in TAUS:
        want = temperature_reference(log_p, tau)
        got = torch.as_tensor(answer(log_p.clone(), tau)).double()
        if got.shape != want.shape:
            raise Wrong(f"return one distribution per row, shape {tuple(want.shape)}, got {tuple(got.shape)}.")
        if not torch.isfinite(got).all():
            raise Wrong(f"at tau = {tau:g} some probabilities are not finite: the powers of p overflow or underflow; "
                        "work with log p / tau and shift each row by its largest value.")
        if not torch.allclose(got.sum(-1), torch.ones(3, dtype=torch.float64), atol=1e-9):
            raise Wrong(f"at tau = {tau:g} the rows do not sum to one: normalise after raising p to 1 / tau.")
        if not torch.allclose(got, want, atol=1e-9):
            if torch.allclose(got, temperature_reference(log_p, 1 / tau), atol=1e-9):
                raise Wrong("the temperature works the wrong way round: p_tau is p to the power 1 / tau, so a "
                            "small tau sharpens the distribution.")
            raise Wrong(f"at tau = {tau:g} the probabilities differ from p^(1/tau), normalised.")
    return ("small tau piles the mass on the most likely symbol (greedy in the limit), tau = 1 is the model, "
            "large tau flattens it towards uniform.")


def word_bits_reference(ppl: float, n_words: int, n_chars: int) -> float:
    """Bits per character of a word model: :math:`N \\log_2 P / C`."""
    return n_words * math.log2(ppl) / n_chars


@exercise("02b.word-bits", hint="perplexity is 2 to the power of the bits per word: how many bits does the whole text of "
                                "N words cost, then, and over how many characters are they spread?")
def check_word_bits(answer) -> str:
    for ppl, n_words, n_chars in ((33.4, 80_000, 452_000), (141.0, 82_430, 449_945), (2.0, 10, 40)):
        want = word_bits_reference(ppl, n_words, n_chars)
        got = float(answer(ppl, n_words, n_chars))
        if math.isclose(got, want, rel_tol=1e-9):
            continue
        if math.isclose(got, n_words * math.log(ppl) / n_chars, rel_tol=1e-9):
            raise Wrong("that is nats per character: bits use the logarithm to base 2.")
        if math.isclose(got, math.log2(ppl), rel_tol=1e-9):
            raise Wrong("that is bits per word: spread the N words' bits over the C characters.")
        raise Wrong(f"for P = {ppl}, N = {n_words:,}, C = {n_chars:,} the text costs N log2 P bits; per character "
                    f"that is {want:.3f}, not {got:.3f}.")
    return ("with about five or six characters per word, a word perplexity in the thirties is about one bit per "
            "character: the word model and the character model can be compared on one scale.")


def share_reference(layer, inputs: torch.Tensor, threshold: float) -> float:
    """The share of the forget gates of ``layer`` over ``inputs`` (T, B, I) above ``threshold``."""
    with torch.no_grad():
        f = torch.stack(unroll(layer, inputs)["f"])  # (T, B, H)
    return float((f > threshold).double().mean())


def _layers():
    """Two small LSTM layers and their inputs: one as initialised, one with its forget bias raised by 3."""
    g = torch.Generator().manual_seed(0)
    torch_state = torch.random.get_rng_state()
    torch.manual_seed(0)
    plain, raised = torch.nn.LSTM(4, 6, dtype=torch.float64), torch.nn.LSTM(4, 6, dtype=torch.float64)
    torch.random.set_rng_state(torch_state)
    with torch.no_grad():
        raised.bias_hh_l0[6:12] += 3.0  # (i, f, g, o) blocks: the second is the forget gate
        plain.weight_hh_l0.mul_(4.0)     # strong recurrence: h_{t-1} matters to the gates
    inputs = torch.randn(15, 3, 4, generator=g, dtype=torch.float64)  # (T, B, I)
    return (plain, raised), inputs


@exercise("02b.forget-share", hint="which of the outputs of the package's unroll (lmcourse.networks.gradflow) holds the "
                                   "forget gates, and over which axes do you count them? For the steps: which "
                                   "whole k is the first to make f to the power k fall below one half?",
          predicts=(math.ceil(math.log(0.5) / math.log(HALF_LIFE_GATE)),))
def check_forget_share(answer) -> str:
    if not (isinstance(answer, (tuple, list)) and len(answer) == 2):
        raise Wrong("give the pair (share_near_one, steps_to_half).")
    share, steps = answer
    layers, inputs = _layers()
    for layer in layers:
        for threshold in (0.5, 0.7, 0.95):
            want = share_reference(layer, inputs, threshold)
            got = float(share(layer, inputs.clone(), threshold))
            if abs(got - want) > 1e-9:
                raise Wrong(f"the share above {threshold} should be {want:.3f}, got {got:.3f}: the forget gate is the "
                            f"second of the four blocks (i, f, g, o), and the state starts at zero and is carried "
                            f"from step to step.")
    want_steps = math.ceil(math.log(0.5) / math.log(HALF_LIFE_GATE))
    if steps is None or steps is Ellipsis:
        raise Wrong("the shares are right; now set steps_to_half to a whole number of steps.")
    if int(steps) != want_steps:
        raise Wrong(f"{HALF_LIFE_GATE} to the power {int(steps)} is {HALF_LIFE_GATE ** int(steps):.3f}: find the first "
                    f"whole ℓ with {HALF_LIFE_GATE}^ℓ below one half.")
    return (f"a gate at {HALF_LIFE_GATE} halves the cell in {want_steps} steps, one at 0.5 in a single step: the gates "
            "that training pushes towards 1 are the units that remember across a sentence.")


def early_stop_reference(valid_ppl, patience: int) -> tuple[int, int]:
    """``(best, stop)``: the epoch kept and the last epoch trained (both from 1) under early stopping."""
    best, lowest = 0, math.inf
    for epoch, ppl in enumerate(valid_ppl, start=1):
        if ppl < lowest:
            best, lowest = epoch, ppl
        elif epoch - best >= patience:
            return best, epoch
    return best, len(valid_ppl)


# (validation perplexities, patience): a U-shaped curve, a bump before the minimum, a curve that never stops
# improving, a plateau (equal is no improvement), and a patience longer than the run
STOP_CASES = (([9.0, 7.0, 6.0, 6.5, 6.8, 7.2, 5.0], 3), ([9.0, 7.0, 6.0, 6.5, 6.8, 7.2, 5.0], 5),
              ([9.0, 8.0, 7.5, 7.9, 7.0, 6.9, 7.1, 7.3, 7.4], 2), ([5.0, 4.0, 3.0, 2.5, 2.0], 2),
              ([4.0, 3.0, 3.0, 3.0, 2.9], 2), ([4.0, 3.0, 3.5, 3.6], 10))


@exercise("02b.early-stop", hint="after each epoch, which epoch holds the lowest perplexity so far, and how many epochs "
                                 "ago was it? When is that number large enough to stop?")
def check_early_stop(answer) -> str:
    for valid_ppl, patience in STOP_CASES:
        want = early_stop_reference(valid_ppl, patience)
        got = answer(list(valid_ppl), patience)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise Wrong("return the pair (best, stop): the epoch kept and the last epoch trained.")
        got = (int(got[0]), int(got[1]))
        if got == want:
            continue
        if got == (want[0] - 1, want[1] - 1):
            raise Wrong("count the epochs from 1, as the trainer's history does (its first row is epoch 1).")
        if got[1] == len(valid_ppl) and want[1] < len(valid_ppl):
            raise Wrong(f"for {valid_ppl} with patience {patience} training stops after epoch {want[1]}: the best "
                        f"epoch is then {patience} epochs old, and the epochs after it are never trained.")
        if got[0] != want[0]:
            raise Wrong(f"for {valid_ppl} with patience {patience} the epoch kept is {want[0]}, not {got[0]}: the best "
                        "of the epochs trained before the stop, and an epoch equal to the best is no improvement.")
        raise Wrong(f"for {valid_ppl} with patience {patience} training stops after epoch {want[1]}, not {got[1]}: "
                    f"at the end of the first epoch that is {patience} epochs past the best.")
    return ("early stopping keeps the best epoch's weights and saves the epochs after it; a patience too short "
            "stops at a bump of the curve, before its real minimum.")
