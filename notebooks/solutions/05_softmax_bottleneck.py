"""Reference answers to the exercises of lesson 05 (the softmax bottleneck), and wrong answers their checks reject."""
import torch


# 05.svd-fit
def svd_fit(A, d):
    bias = A.mean(0) - A.mean()                                   # (M,) the column means: the bias b
    centred = A - A.mean(1, keepdim=True) - bias                  # (N, M) row and column means removed
    U, S, Vh = torch.linalg.svd(centred, full_matrices=False)
    H, W = U[:, :d] * S[:d].sqrt(), Vh[:d].T * S[:d].sqrt()       # (N, d), (M, d)
    return H @ W.T + bias                                         # (N, M) logits of a d-dimensional softmax


# 05.no-bias
def min_dim_without_bias(A, rtol=1e-8):
    A = A - A.mean(1, keepdim=True)                               # only the normaliser's row shift is free
    s = torch.linalg.svdvals(A.double())
    return int((s > rtol * s[0]).sum())


# 05.knee
knee_40_values = 39   # 100 x 40 table of rank 40; with its row and column means removed, rank 39


# 05.sharpness
sharpness_prediction = {"sigma": "doubles", "min_dim": 99, "kl_16": "smaller"}
why_sharpness = "b"    # KL weighs each error by p: a sharp row has few likely values to get right


def _svd_of_A(A, d):                       # truncates A itself: not exact where the centred A would be
    U, S, Vh = torch.linalg.svd(A, full_matrices=False)
    return (U[:, :d] * S[:d]) @ Vh[:d]


def _no_bias_added(A, d):                  # centres, but forgets to put the column means back
    return svd_fit(A, d) - (A.mean(0) - A.mean())


def _exact_copy(A, d):                     # returns A itself: not a d-dimensional softmax
    return A.clone()


def _double_centred_rank(A, rtol=1e-8):    # the dimension WITH a bias
    A = A - A.mean(1, keepdim=True) - A.mean(0, keepdim=True) + A.mean()
    s = torch.linalg.svdvals(A)
    return int((s > rtol * s[0]).sum())


def _rank_of_A(A, rtol=1e-8):              # forgets that the normaliser is free
    s = torch.linalg.svdvals(A)
    return int((s > rtol * s[0]).sum())


ANSWERS = {
    "05.svd-fit": svd_fit,
    "05.no-bias": min_dim_without_bias,
    "05.knee": knee_40_values,
    "05.sharpness": sharpness_prediction,
    "05.sharpness-why": why_sharpness,
}
WRONG = {
    "05.svd-fit": [_svd_of_A, _no_bias_added, _exact_copy],
    "05.no-bias": [_double_centred_rank, _rank_of_A],
    "05.knee": [40, 41, 100],
    "05.sharpness": [{"sigma": "same", "min_dim": 99, "kl_16": "smaller"},
                     {"sigma": "doubles", "min_dim": 100, "kl_16": "smaller"},
                     {"sigma": "doubles", "min_dim": 99, "kl_16": "larger"}],
    "05.sharpness-why": ["a", "c", "d"],
}
