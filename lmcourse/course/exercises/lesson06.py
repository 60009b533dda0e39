r"""Lesson 06 exercises: the mixture in log space, the ranks, the memory, the responsibilities.

- ``06.mixture``: :math:`\log p_v = \operatorname{logsumexp}_k(\log\pi_k + \log\operatorname{softmax}(z_k)_v)`,
  exact even where :math:`p_v` underflows (the paper's code takes :math:`\log(p + 10^{-8})`).
- ``06.rank``: the numerical ranks of the log-probability matrices of a softmax, a one-expert MoS and
  a two-expert MoS of the same small :math:`d`, over many contexts.
- ``06.memory``: how many floats of the (T, B, K, V) tensor a training step holds, with and without
  gradient accumulation (``small_batch_size``).
- ``06.responsibility``: the posterior over experts given the next word,
  :math:`r_k = \pi_k p_k(w) / p(w)`, which is also :math:`\partial \log p(w) / \partial \log \pi_k`.
"""
from __future__ import annotations

import torch

from ...networks.mos import MixtureOfSoftmaxes
from .registry import Wrong, exercise

RANK_N, RANK_V, RANK_D, RANK_K = 60, 40, 3, 2  # 06.rank: contexts, words, dimension, experts
RTOL = 1e-8  # numerical rank: singular values above RTOL x the largest


def _mixture_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(what it is, log_pi (N, K), logits (N, K, V)) in float64."""
    g = torch.Generator().manual_seed(6)
    cases = []
    for what, scale in (("ordinary logits", 1.0),
                        ("logits in the thousands, where many probabilities underflow", 1000.0)):
        log_pi = torch.log_softmax(torch.randn(5, 3, generator=g, dtype=torch.float64), -1)
        cases.append((what, log_pi, torch.randn(5, 3, 8, generator=g, dtype=torch.float64) * scale))
    return cases


def _mixture_reference(log_pi: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(log_pi.unsqueeze(-1) + torch.log_softmax(logits, -1), dim=1)  # (N, V)


@exercise("06.mixture", hint="p(w) = sum_k pi_k p_k(w): what is the log of each product pi_k p_k(w)? And which torch "
                             "function gives the log of a sum of exps without leaving log space?")
def check_mixture(answer) -> str:
    for what, log_pi, logits in _mixture_cases():
        got = torch.as_tensor(answer(log_pi.clone(), logits.clone())).double()
        want = _mixture_reference(log_pi, logits)
        if got.shape != want.shape:
            raise Wrong(f"for {what} the result has shape {tuple(got.shape)}, not {tuple(want.shape)} (N, V): "
                        "reduce over the experts, dim=1.")
        if not torch.isfinite(got).all():
            raise Wrong(f"for {what} some log-probabilities are -inf or NaN: exp() underflowed; stay in log space "
                        "with logsumexp.")
        error = float((got - want).abs().max())
        if error > 1e-8:
            raise Wrong(f"for {what} your log-probabilities are off by up to {error:.3g} nats: weight each expert's "
                        "log_softmax by log pi_k and combine with logsumexp (log(p + 1e-8) floors them at -18.4).")
    return ("the mixture is exact in log space, even for probabilities below exp(-700), where log(p + 1e-8) would "
            "report -18.4.")


def _rank_truth() -> dict:
    """The numerical ranks, computed: random weights, RANK_N contexts, RANK_V words, d = RANK_D."""
    g = torch.Generator().manual_seed(60)
    H = torch.randn(RANK_N, RANK_D, generator=g, dtype=torch.float64)  # (N, d) contexts
    W = torch.randn(RANK_V, RANK_D, generator=g, dtype=torch.float64)  # (V, d) words
    b = torch.randn(RANK_V, generator=g, dtype=torch.float64)  # (V,)
    rows = {"softmax": torch.log_softmax(H @ W.T + b, -1)}
    for name, K in (("mos_k1", 1), (f"mos_k{RANK_K}", RANK_K)):
        torch.manual_seed(61)
        head = MixtureOfSoftmaxes(RANK_D, RANK_D, RANK_V, K).double().eval()
        with torch.no_grad():
            head.weight.copy_(W)
            head.bias.copy_(b)
            rows[name] = head(H.view(RANK_N, 1, RANK_D))[:, 0]  # (N, V)
    ranks = {}
    for name, A in rows.items():
        s = torch.linalg.svdvals(A)
        ranks[name] = int((s > RTOL * s[0]).sum())
    return ranks


@exercise("06.rank", predicts=lambda: (_rank_truth(),),
          hint="how much rank do H W^T, a bias and a row shift each add? What is a mixture with K = 1? "
                          "And is the log of a sum of two softmaxes still a product through d numbers?")
def check_rank(answer) -> str:
    truth = _rank_truth()
    if not isinstance(answer, dict) or set(answer) != set(truth):
        raise Wrong(f"give a dict with the keys {sorted(truth)}, one whole number each.")
    for name, want in truth.items():
        if int(answer[name]) != want:
            raise Wrong(f"{name}: you predicted rank {answer[name]}, but the matrix of {RANK_N} contexts x {RANK_V} "
                        f"words has numerical rank {want}" + (" (d, plus one for the bias, plus one for the "
                                                              "normaliser)" if want == RANK_D + 2 else "") + ".")
    return (f"a softmax of dimension {RANK_D}, with or without the tanh in front, stops at rank {RANK_D + 2}; "
            f"two experts of the same dimension already fill all {RANK_V} columns.")


def _memory_cases() -> list[tuple[tuple, int]]:
    return [((70, 12, 15, 10_000, None), 70 * 12 * 15 * 10_000),  # PTB, the README's run
            ((70, 15, 15, 33_278, 5), 70 * 5 * 15 * 33_278),  # WikiText-2 with small_batch_size 5
            ((35, 20, 4, 1_000, 20), 35 * 20 * 4 * 1_000),  # sub-batch = the batch
            ((35, 20, 4, 1_000, 40), 35 * 20 * 4 * 1_000)]  # a sub-batch larger than the batch is the batch


@exercise("06.memory", hint="the tensor is T x B' x K x V: how many columns B' are read at once, with a "
                            "sub-batch and without one? Can a sub-batch hold more columns than the batch?")
def check_memory(answer) -> str:
    for (T, B, K, V, small), want in _memory_cases():
        got = answer(T, B, K, V, small)
        if got != want:
            hint = ("you left out the K experts" if got * K == want else
                    "with small_batch_size only that many columns are read at once" if small and got > want else
                    "count T x B' x K x V floats, B' = min(batch, small_batch_size)")
            raise Wrong(f"for T={T}, B={B}, K={K}, V={V:,}, small_batch_size={small} you gave {got:,} floats, "
                        f"not {want:,}: {hint}.")
    ptb = 70 * 12 * 15 * 10_000 * 4 / 2**30
    return (f"PTB's step holds {ptb:.2f} GiB of mixture logits at once in float32; WikiText-2 at batch 15 would hold "
            f"{70 * 15 * 15 * 33_278 * 4 / 2**30:.2f} GiB, a third of it with small_batch_size 5.")


def _responsibility_cases():
    g = torch.Generator().manual_seed(16)
    for scale in (1.0, 200.0):
        log_pi = torch.log_softmax(torch.randn(6, 4, generator=g, dtype=torch.float64) * 2, -1)
        logits = torch.randn(6, 4, 9, generator=g, dtype=torch.float64) * scale
        w = torch.randint(0, 9, (6,), generator=g)
        yield scale, log_pi, logits, w


@exercise("06.responsibility", hint="the responsibility is expert k's share of p(w) (Bayes' rule): what are the "
                                    "share's numerator and denominator as logs, and which function normalises over k?")
def check_responsibility(answer) -> str:
    for scale, log_pi, logits, w in _responsibility_cases():
        got = torch.as_tensor(answer(log_pi.clone(), logits.clone(), w.clone())).double()
        free = log_pi.clone().requires_grad_()
        log_p = torch.logsumexp(free.unsqueeze(-1) + torch.log_softmax(logits, -1), 1)  # (N, V)
        want, = torch.autograd.grad(log_p.gather(1, w.view(-1, 1)).sum(), free)  # (N, K) d log p(w) / d log pi
        if got.shape != want.shape:
            raise Wrong(f"the result has shape {tuple(got.shape)}, not {tuple(want.shape)}: one weight per context "
                        "and expert.")
        if not torch.isfinite(got).all():
            raise Wrong(f"with logits of size {scale:g} some responsibilities are NaN or inf: compute them in log "
                        "space and exponentiate last.")
        error = float((got - want).abs().max())
        if error > 1e-9:
            prior = float((got - log_pi.exp()).abs().max()) < 1e-9
            raise Wrong("that is the prior pi: the responsibilities also weigh how well each expert predicted w."
                        if prior else f"off by up to {error:.3g}: r_k = pi_k p_k(w) / p(w), normalised over the "
                                      "experts, not the words.")
    return ("the responsibilities are exactly the gradient of log p(w) with respect to log pi: an expert's prior is "
            "pushed up in proportion to its share of the credit for the observed word.")

