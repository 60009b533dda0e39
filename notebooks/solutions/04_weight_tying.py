"""Reference answers to the exercises of lesson 04 (weight tying), and wrong answers their checks reject."""
import torch


# 04.tie
def tie(model):
    model.head.decoder.weight = model.embedding.weight    # the same Parameter object: one table, one gradient
    return model


# 04.rows
rows_prediction = ({1, 3}, {0, 1, 2, 3, 4, 5})   # the lookup touches the words read; the softmax every word


# 04.share-limit
share_limit = 200 / (2 * 200 + 1)    # V d / (V (2d + 1) + LSTM) with d = 200: the decoder bias stays untied
why_share_limit = "b"    # per word: d + d + 1 (the decoder bias), of which tying removes d


# 04.band
def band_change(log_p_untied, log_p_tied, counts, lo, hi):
    inside = (counts >= lo) & (counts < hi)                      # the tokens of the band
    return (-log_p_tied[inside]).mean() - (-log_p_untied[inside]).mean()   # tied − untied, nats per token


def _copy(model):                 # equal numbers, but two Parameters that drift apart
    with torch.no_grad():
        model.head.decoder.weight.copy_(model.embedding.weight)
    return model


def _clone(model):                # a new Parameter holding a copy
    model.head.decoder.weight = torch.nn.Parameter(model.embedding.weight.detach().clone())
    return model


ANSWERS = {
    "04.tie": tie,
    "04.rows": rows_prediction,
    "04.share-limit": share_limit,
    "04.share-limit-why": why_share_limit,
    "04.band": band_change,
}
WRONG = {
    "04.tie": [_copy, _clone],
    "04.rows": [({1, 3}, {1, 3, 4}), ({0, 1, 2, 3, 4, 5}, {0, 1, 2, 3, 4, 5})],
    "04.share-limit": [0.5, 0.46],
    "04.share-limit-why": ["a", "c", "half"],
    "04.band": [lambda u, t, c, lo, hi: -band_change(u, t, c, lo, hi),                         # the sign reversed
                lambda u, t, c, lo, hi: (u - t).mean(),                                         # every token
                lambda u, t, c, lo, hi: (u - t)[(c >= lo) & (c <= hi)].mean()],                 # hi included
}
