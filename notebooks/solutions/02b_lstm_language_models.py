"""Reference answers to the exercises of lesson 02b (LSTM language models), and wrong answers their checks reject."""
import math

import torch

from lmcourse.networks.gradflow import unroll


# 02b.temperature
def with_temperature(log_p, tau):
    return torch.softmax(log_p / tau, dim=-1)                      # softmax shifts each row by its maximum


# 02b.word-bits
def word_bits_per_char(ppl, n_words, n_chars):
    return n_words * math.log2(ppl) / n_chars                      # the text's bits, spread over its characters


# 02b.forget-share
def share_near_one(layer, inputs, threshold):
    with torch.no_grad():
        f = torch.stack(unroll(layer, inputs)["f"])                # (T, B, H)
    return float((f > threshold).double().mean())


steps_to_half = math.ceil(math.log(0.5) / math.log(0.9))           # 0.9^7 = 0.48 < 1/2 < 0.9^6 = 0.53


# 02b.early-stop
def early_stop(valid_ppl, patience):
    best, lowest = 0, math.inf
    for epoch, ppl in enumerate(valid_ppl, start=1):
        if ppl < lowest:                                            # a new best epoch
            best, lowest = epoch, ppl
        elif epoch - best >= patience:                              # the best is patience epochs old: stop here
            return best, epoch
    return best, len(valid_ppl)


def _tau_upside_down(log_p, tau):
    return torch.softmax(log_p * tau, dim=-1)


def _not_normalised(log_p, tau):
    return (log_p / tau).exp()


def _first_gate_block(layer, inputs, threshold):                  # reads the input gate, not the forget gate
    H = layer.hidden_size
    h = c = inputs.new_zeros(inputs.shape[1], H)
    gates = []
    with torch.no_grad():
        for x_t in inputs:
            z = x_t @ layer.weight_ih_l0.T + layer.bias_ih_l0 + h @ layer.weight_hh_l0.T + layer.bias_hh_l0
            i_t, f_t, g_t, o_t = z.sigmoid().chunk(4, 1)
            c = f_t * c + i_t * torch.tanh(z.chunk(4, 1)[2])
            h = o_t * c.tanh()
            gates.append(i_t)
    return float((torch.stack(gates) > threshold).double().mean())


def _best_of_all(valid_ppl, patience):                              # never stops: the best of every epoch
    return min(range(len(valid_ppl)), key=valid_ppl.__getitem__) + 1, len(valid_ppl)


def _from_zero(valid_ppl, patience):
    best, stop = early_stop(valid_ppl, patience)
    return best - 1, stop - 1


def _equal_improves(valid_ppl, patience):                            # an epoch equal to the best counts as better
    best, lowest = 0, math.inf
    for epoch, ppl in enumerate(valid_ppl, start=1):
        if ppl <= lowest:
            best, lowest = epoch, ppl
        elif epoch - best >= patience:
            return best, epoch
    return best, len(valid_ppl)


ANSWERS = {
    "02b.temperature": with_temperature,
    "02b.word-bits": word_bits_per_char,
    "02b.forget-share": (share_near_one, steps_to_half),
    "02b.early-stop": early_stop,
}
WRONG = {
    "02b.temperature": [_tau_upside_down, _not_normalised],
    "02b.word-bits": [lambda p, n, c: n * math.log(p) / c, lambda p, n, c: math.log2(p)],
    "02b.forget-share": [(share_near_one, 6), (_first_gate_block, steps_to_half)],
    "02b.early-stop": [_best_of_all, _from_zero, _equal_improves],
}
