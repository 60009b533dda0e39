r"""Lesson 09 exercises: NT-ASGD's trigger, the last mixing step, variable BPTT's mean window, and when
averaging can start.

- ``09.trigger``: switch to averaging when the epoch's validation loss is worse than the best of all
  epochs *before the last* ``n``: ``len(H) > n and loss > min(H[:-n])`` (the awd-lstm-lm code; Merity
  et al. 2018, Section 3 words it differently, a known typo).
- ``09.mix``: :math:`\log\big((1-\lambda)\,p + \lambda\,p_{\text{cache}}\big)` from log-probabilities,
  computed without leaving log space (Grave et al. 2017's linear interpolation).
- ``09.window-mean``: the mean window length of variable BPTT, :math:`\mu = \text{bptt}` with
  probability 0.95 and :math:`\text{bptt}/2` otherwise, then :math:`\max(5, \operatorname{int}(\mathcal{N}(\mu, 5^2)))`
  (Merity et al. 2018, Section 4.1).
- ``09.earliest-switch``: with ``nonmono = n`` the trigger needs ``n + 1`` earlier epochs, so the
  earliest switch is at the end of epoch ``n + 2``.
"""
from __future__ import annotations

import math

import torch

from ...corpora.data import variable_bptt_batches
from .registry import Wrong, exercise

__all__ = ["check_trigger", "check_mix", "check_window_mean", "check_earliest_switch"]


def _reference_trigger(history, loss, n) -> bool:
    return len(history) > n and loss > min(history[:-n])


def _trigger_cases() -> list:
    g = torch.Generator().manual_seed(9)
    cases = [([5.0, 4.0, 3.0], 3.5, 1), ([5.0, 4.0, 3.0], 3.5, 2), ([5.0, 4.0], 6.0, 2), ([4.0, 3.0, 3.1, 3.2], 3.05, 2),
             ([3.0, 3.0], 3.0, 1), ([4.0, 5.0, 6.0], 4.5, 2), ([3.0, 4.0, 4.5], 3.5, 1)]
    for _ in range(200):
        k = int(torch.randint(0, 9, (), generator=g))
        history = [round(float(v), 1) for v in 3 + torch.rand(k, generator=g)]
        cases.append((history, round(3 + float(torch.rand((), generator=g)), 1), int(torch.randint(1, 4, (), generator=g))))
    return cases


_TRIGGER_MISTAKES = [  # (a rule students write instead, what is wrong with it)
    (lambda h, loss, n: len(h) >= n > 0 and loss > min(h[-n:]),
     "you compared with the best of the last n epochs (the paper's wording); the code compares with the best "
     "epoch *before* the last n."),
    (lambda h, loss, n: bool(h) and loss > min(h),
     "you compared with the best of all earlier epochs; the last n epochs are left out of that minimum."),
]


@exercise("09.trigger", hint="write down six losses and n = 2, and mark the epochs the new loss is compared "
                             "with: the last n, or those before them? What must the history hold before the "
                             "rule can fire at all?")
def check_trigger(answer) -> str:
    cases = _trigger_cases()
    got = [answer(list(h), loss, n) for h, loss, n in cases]
    if any(not isinstance(v, bool) for v in got):
        raise Wrong(f"return True or False, got {type(next(v for v in got if not isinstance(v, bool))).__name__}.")
    want = [_reference_trigger(h, loss, n) for h, loss, n in cases]
    if got == want:
        return "averaging starts only once validation has stalled for n epochs against the best before them."
    for rule, message in _TRIGGER_MISTAKES:
        if got == [rule(h, loss, n) for h, loss, n in cases]:
            raise Wrong(message)
    i = next(i for i in range(len(cases)) if got[i] != want[i])
    h, loss, n = cases[i]
    raise Wrong(f"for history {h}, loss {loss} and n={n} the trigger is {want[i]}, you said {got[i]}.")


@exercise("09.mix", hint="what does a product of probabilities become in log space, and so what are "
                         "log((1 - lam) p) and log(lam q)? Which torch function adds two probabilities that you "
                         "hold as logs, without leaving log space?")
def check_mix(answer) -> str:
    log_p = torch.tensor([-0.5, -3.0, -800.0, -20.0, -900.0], dtype=torch.float64)
    log_q = torch.tensor([-2.0, -0.1, -1.0, -850.0, -950.0], dtype=torch.float64)
    lam = 0.2
    got = answer(log_p.clone(), log_q.clone(), lam)
    if not isinstance(got, torch.Tensor) or got.shape != log_p.shape:
        raise Wrong("return a tensor of log-probabilities with one entry per token.")
    want = torch.logaddexp(math.log(1 - lam) + log_p, math.log(lam) + log_q)
    if not torch.isfinite(got).all():
        raise Wrong("some entries are -inf: exp(-900) underflows to 0 in floating point, so mix in log space "
                    "(torch.logaddexp) instead of exponentiating.")
    swapped = torch.logaddexp(math.log(lam) + log_p, math.log(1 - lam) + log_q)
    if torch.allclose(got, swapped, rtol=0, atol=1e-9) and not torch.allclose(swapped, want):
        raise Wrong("lam weighs the cache and 1 - lam the model; the two weights are swapped.")
    if not torch.allclose(got, want, rtol=0, atol=1e-9):
        raise Wrong("the values differ from log((1 - lam) exp(log_p) + lam exp(log_q)).")
    return "the mixture stays finite even where one of the two probabilities underflows."


def _window_mean(bptt: int = 70, draws: int = 20000) -> float:
    """The mean window length of variable BPTT, estimated from the package's own generator."""
    source = torch.zeros(bptt * 2 * draws, 1, dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    lengths = [n for _, _, n in variable_bptt_batches(source, bptt, g)][:draws]
    return sum(lengths) / len(lengths)


@exercise("09.window-mean", predicts=lambda: (_window_mean(),),
          hint="which two centres can a window have, and how often does each come up? What is the mean "
               "of a mixture, and what does int() do, on average, to a number drawn around a centre?")
def check_window_mean(answer) -> str:
    if not isinstance(answer, (int, float)) or isinstance(answer, bool):
        raise Wrong("give a number: the mean window length for bptt = 70.")
    mean = _window_mean()
    if abs(answer - 70) < 0.3:
        raise Wrong("that is the main window only: one window in twenty is centred on bptt / 2 = 35.")
    if abs(answer - 35) < 0.3 or abs(answer - 52.5) < 0.3:
        raise Wrong("the two window centres are not equally likely: 95% of the windows centre on 70.")
    if abs(answer - mean) > 1.0:
        raise Wrong(f"the windows average about {mean:.1f} tokens, more than one away from {answer}.")
    return (f"the windows average {mean:.2f} tokens: 0.95 x 70 + 0.05 x 35 = 68.25, less about half a token "
            "that int() cuts off.")


@exercise("09.earliest-switch", hint="how many earlier epochs must the history hold before the trigger can "
                                     "fire at all? Which epoch is the first to have that many before it?")
def check_earliest_switch(answer) -> str:
    for n in (1, 2, 5, 10):
        history = []
        epoch = 0
        while True:  # the earliest epoch whose loss (worse than all before) triggers the switch
            epoch += 1
            loss = 10.0 if epoch > 1 else 1.0
            if _reference_trigger(history, loss, n):
                break
            history.append(loss)
        got = answer(n)
        if got != epoch:
            if got == n + 1:
                raise Wrong(f"with nonmono={n}, epoch {n + 1} has only {n} epoch{'s' if n > 1 else ''} before it; "
                            f"the trigger needs more than {n}.")
            raise Wrong(f"with nonmono={n} the earliest switch is at the end of epoch {epoch}, not {got}.")
    return "averaging can start at the end of epoch n + 2 at the earliest, so a short run needs a small nonmono."
