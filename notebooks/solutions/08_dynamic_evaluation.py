"""Reference answers to the exercises of lesson 08 (dynamic evaluation), and wrong answers their checks reject."""
import torch


# 08.sgd-step
def sgd_step(phi, grad, phi_0, lr, decay):
    return phi - lr * grad + decay * (phi_0 - phi)   # both terms read phi before the step


# 08.decay-rates
def rms_decay_rates(ms, decay):
    mean_ms = sum(m.mean() for m in ms) / len(ms)       # one number: the mean over tensors of each mean
    return [torch.clamp(m / mean_ms, max=1 / decay) for m in ms]


# 08.twice
twice_prediction = "same"      # every call starts from phi_0 and never writes the wrapped model


# 08.lr-zero
lr_zero_equals = "static"      # no step, and the decay pulls towards phi_0, where phi already is
why_lr_zero = "a"    # no step, and the pull towards phi_0 is zero where phi already is


def _decay_after_step(phi, grad, phi_0, lr, decay):
    phi = phi - lr * grad
    return phi + decay * (phi_0 - phi)


def _in_place(phi, grad, phi_0, lr, decay):
    phi += decay * (phi_0 - phi) - lr * grad
    return phi


def _summed(ms, decay):                                 # the first code version's normaliser
    total = sum(m.mean() for m in ms)
    return [torch.clamp(m / total, max=1 / decay) for m in ms]


def _unclipped(ms, decay):
    mean_ms = sum(m.mean() for m in ms) / len(ms)
    return [m / mean_ms for m in ms]


ANSWERS = {
    "08.sgd-step": sgd_step,
    "08.decay-rates": rms_decay_rates,
    "08.twice": twice_prediction,
    "08.lr-zero": lr_zero_equals,
    "08.lr-zero-why": why_lr_zero,
}
WRONG = {
    "08.sgd-step": [_decay_after_step, _in_place, lambda phi, grad, phi_0, lr, decay: phi - lr * grad],
    "08.decay-rates": [_summed, _unclipped],
    "08.twice": ["lower", "higher"],
    "08.lr-zero": ["dynamic", "oracle"],
    "08.lr-zero-why": ["b", "c", "static"],
}
