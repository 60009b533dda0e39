r"""Lesson 08 exercises: the SGD rule with decay, the RMS decay rates, and what each scoring call starts from.

- ``08.sgd-step``: one step of :math:`\varphi \leftarrow \varphi - \eta \nabla_\varphi \mathcal{L}
  + \rho(\varphi_0 - \varphi)` (Mikolov et al. 2010 with a decay towards the trained weights; Krause et al. 2018,
  Section 4). The course writes the weights :math:`\varphi` and the decay :math:`\rho` (the paper's :math:`\theta`
  and :math:`\lambda`, which the course keeps for the cache).
- ``08.decay-rates``: :math:`r_p = \min(\mathrm{MS}_p / \overline{\mathrm{MS}}, 1/\rho)` with
  :math:`\overline{\mathrm{MS}}` the mean over parameter tensors of each tensor's mean MS
  (Krause et al. 2018, Section 5).
- ``08.twice``: every ``DynamicEval.score`` adapts its own copy starting from :math:`\varphi_0`, so
  scoring the same text twice gives the same perplexity.
- ``08.lr-zero``: with :math:`\eta = 0` the weights never leave :math:`\varphi_0` (the decay pulls
  towards where they already are), so dynamic evaluation *is* static evaluation.
- ``08.lr-zero-why``: the reason behind the exercise's answer, one letter of 3.
"""
from __future__ import annotations

import torch

from .registry import Wrong, exercise, multiple_choice


def _tensors(seed: int, shapes=((4, 3), (5,), (2, 2))) -> list:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]


@exercise("08.sgd-step", hint="two forces move phi: a step against the gradient, scaled by lr, and a pull towards "
                              "phi_0 that grows with the distance, scaled by decay. Which phi does each one "
                              "start from?")
def check_sgd_step(answer) -> str:
    phi, grad, phi_0 = _tensors(0, [(6,)]) + _tensors(1, [(6,)]) + _tensors(2, [(6,)])
    lr, decay = 0.3, 0.2
    given = phi.clone()
    got = answer(given, grad.clone(), phi_0.clone(), lr, decay)
    if not isinstance(got, torch.Tensor) or got.shape != phi.shape:
        raise Wrong("return the new phi, a tensor of the same shape as phi.")
    want = phi - lr * grad + decay * (phi_0 - phi)
    if torch.allclose(got, want, rtol=0, atol=1e-12):
        if not torch.equal(given, phi):
            raise Wrong("the numbers are right, but phi was changed in place: return a new tensor and leave "
                        "the argument as it was.")
        return ("a gradient step towards the text just read, and a pull of decay x (phi_0 - phi) back "
                "towards the trained weights.")
    late = phi - lr * grad
    if torch.allclose(got, late + decay * (phi_0 - late), rtol=0, atol=1e-12):
        raise Wrong("the decay was computed from phi after the gradient step; the rule pulls on phi as it "
                    "was before the step.")
    if torch.allclose(got, phi - lr * grad, rtol=0, atol=1e-12):
        raise Wrong("that is plain SGD: the decay term decay * (phi_0 - phi) is missing.")
    if torch.allclose(got, phi + lr * grad + decay * (phi_0 - phi), rtol=0, atol=1e-12):
        raise Wrong("the step goes up the gradient: subtract lr * grad to lower the loss.")
    raise Wrong("the new phi differs from phi - lr * grad + decay * (phi_0 - phi).")


@exercise("08.decay-rates", hint="the rates are relative: each tensor's MS is compared with one number shared by all the "
                                 "tensors: which mean is MS-bar, over what? (the lesson defines it where the rule is "
                                 "written out); and no rate may pass 1 / decay.")
def check_decay_rates(answer) -> str:
    ms = [t.abs() for t in _tensors(3)]
    ms[0][0, 0] = 40.0  # one large gradient, so that the clip matters
    decay = 0.2
    got = answer(ms, decay)
    if not isinstance(got, (list, tuple)) or len(got) != len(ms):
        raise Wrong(f"return a list with one tensor of rates per MS tensor ({len(ms)} here).")
    mean = sum(float(m.mean()) for m in ms) / len(ms)
    want = [torch.clamp(m / mean, max=1 / decay) for m in ms]
    if all(torch.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(got, want)):
        return ("rates average about one, tensors with larger training gradients are pulled back harder, "
                "and decay x rate never exceeds one, so the pull never overshoots phi_0.")
    total = sum(float(m.mean()) for m in ms)
    if all(torch.allclose(a, torch.clamp(m / total, max=1 / decay), rtol=1e-9) for a, m in zip(got, ms)):
        raise Wrong("that divides by the SUM over tensors of the mean MS (the first version of the reference code); "
                    "divide by their mean, so that the rates average about one.")
    if all(torch.allclose(a, m / mean, rtol=1e-9) for a, m in zip(got, ms)):
        raise Wrong("the rates are not clipped: a rate above 1 / decay would make decay x rate > 1 and overshoot "
                    "phi_0.")
    if all(torch.allclose(a, torch.clamp(m / m.mean(), max=1 / decay), rtol=1e-9) for a, m in zip(got, ms)):
        raise Wrong("each tensor was divided by its own mean; divide every tensor by one shared number, the mean "
                    "over tensors of each tensor's mean MS.")
    raise Wrong("the rates differ from min(MS / mean over tensors of mean(MS), 1 / decay).")


@exercise("08.twice", hint="score() adapts a private copy of the weights; where does each call start from?",
          predicts=("same",))
def check_twice(answer) -> str:
    choice = str(answer).strip().lower()
    if choice not in ("lower", "higher", "same"):
        raise Wrong("answer 'lower', 'higher' or 'same'.")
    if choice != "same":
        raise Wrong("each call of score adapts its own copy starting from phi_0 and leaves the wrapped model "
                    "untouched, so the second call repeats the first exactly.")
    return ("the same, to the last digit: every call starts from the trained weights phi_0, so nothing learned "
            "from one text leaks into the scoring of the next.")


@exercise("08.lr-zero", hint="with lr = 0, where does phi start, and where does the decay pull it?")
def check_lr_zero(answer) -> str:
    choice = str(answer).strip().lower()
    if choice not in ("static", "dynamic", "oracle"):
        raise Wrong("answer 'static', 'dynamic' or 'oracle'.")
    if choice != "static":
        raise Wrong("with lr = 0 there is no gradient step, and the decay pulls phi towards phi_0, where it "
                    "already is: the weights never move.")
    return "the weights stay at phi_0 at every segment, so every prediction is the static model's."


# 08.lr-zero-why: the lesson lists 3 reasons; what each wrong one misses
_WHY_NOT_LR_ZERO_WHY = {
    "b": "the decay term rho r (phi_0 - phi) has no eta in it: it would pull even at lr = 0, so "
         "ask where phi is when it pulls.",
    "c": "the decay is a pull on the weights themselves, towards phi_0: "
         "where are the weights when lr = 0?",
}


multiple_choice("08.lr-zero-why", right="a", why_not=_WHY_NOT_LR_ZERO_WHY,
                hint="what does one step of the update, phi - eta * step + rho * r * (phi_0 - phi), give "
                "at eta = 0, starting from phi = phi_0?",
                explanation="phi - 0 + rho r (phi_0 - phi) with phi = phi_0 leaves phi = phi_0 at every "
                "segment, whatever rho is.")
