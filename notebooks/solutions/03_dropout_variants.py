"""Reference answers to the exercises of lesson 03 (dropout variants), and wrong answers their checks reject."""
import torch
import torch.nn.functional as F


# 03.embedding
def my_embedding_dropout(E_weight, words, p):
    m = (torch.rand(E_weight.shape[0], 1) >= p).float() / (1 - p)   # (V, 1): one draw per word type
    return E_weight[words] * m[words]                                # (N, d): every occurrence shares its word's draw


# 03.word-types
p_all_three_dropped = 0.1    # one draw decides for the word type, so all occurrences go together: p


# 03.weight-noise
noise_ratio = 3.0    # measured above; in theory sqrt(0.9 / 0.1) / sqrt(0.5 / 0.5) = 3
why_noise_ratio = "a"    # Var(M w h / (1-p)) = p / (1-p) w^2 h^2, and variances of independent terms add


def _coordinates(E_weight, words, p):        # standard dropout on the looked-up vectors
    return F.dropout(E_weight[words], p, training=True)


def _per_occurrence(E_weight, words, p):     # a whole row, but a fresh draw at every occurrence
    m = (torch.rand(len(words), 1) >= p).float() / (1 - p)
    return E_weight[words] * m


def _unscaled(E_weight, words, p):           # the right mask, without 1 / (1 - p)
    m = (torch.rand(E_weight.shape[0], 1) >= p).float()
    return E_weight[words] * m[words]


ANSWERS = {
    "03.embedding": my_embedding_dropout,
    "03.word-types": p_all_three_dropped,
    "03.weight-noise": noise_ratio,
    "03.weight-noise-why": why_noise_ratio,
}
WRONG = {
    "03.embedding": [_coordinates, _per_occurrence, _unscaled],
    "03.word-types": [0.001, 0.9, 0.3],
    "03.weight-noise": [1.8, 9.0],
    "03.weight-noise-why": ["b", "c", "e"],
}
