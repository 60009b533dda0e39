"""Reference answers to the exercises of lesson 06 (the mixture of softmaxes), and wrong answers their checks reject."""
import torch


# 06.mixture
def mixture_log_probs(log_pi, logits):
    # log_pi: (N, K) log prior; logits: (N, K, V) one row of logits per expert
    log_p_k = torch.log_softmax(logits, dim=-1)                    # (N, K, V) each expert's log-probabilities
    return torch.logsumexp(log_pi.unsqueeze(-1) + log_p_k, dim=1)  # (N, V) log sum_k pi_k p_k(v)


# 06.rank
rank_prediction = {"softmax": 5, "mos_k1": 5, "mos_k2": 40}


# 06.memory
def mixture_floats(T, B, K, V, small_batch_size=None):
    columns = B if small_batch_size is None else min(B, small_batch_size)  # columns read at once
    return T * columns * K * V


# 06.responsibility
def responsibilities(log_pi, logits, w):
    # log_pi: (N, K); logits: (N, K, V); w: (N,) the observed next word of each context
    log_p_k = torch.log_softmax(logits, dim=-1)                    # (N, K, V)
    joint = log_pi + log_p_k.gather(2, w.view(-1, 1, 1).expand(-1, logits.size(1), 1)).squeeze(2)  # (N, K)
    return torch.softmax(joint, dim=1)                             # pi_k p_k(w) / sum_j pi_j p_j(w)


def _paper_style(log_pi, logits):            # the paper's code: log(p + 1e-8), floored at -18.4
    p = (log_pi.exp().unsqueeze(-1) * torch.softmax(logits, -1)).sum(1)
    return torch.log(p + 1e-8)


def _uniform_prior(log_pi, logits):          # forgets the prior: every expert weighs 1/K
    return torch.logsumexp(torch.log_softmax(logits, -1), dim=1) - torch.log(torch.tensor(float(logits.size(1))))


def _mixed_logits(log_pi, logits):           # mixes logits instead of probabilities: one softmax again
    return torch.log_softmax((log_pi.exp().unsqueeze(-1) * logits).sum(1), -1)


def _exp_first(log_pi, logits):              # exact formula, but exponentiates first: underflows to -inf
    return torch.log((log_pi.exp().unsqueeze(-1) * torch.softmax(logits, -1)).sum(1))


def _prior_only(log_pi, logits, w):          # the prior, blind to the observed word
    return log_pi.exp()


def _over_words(log_pi, logits, w):          # normalises over the words instead of the experts
    return torch.log_softmax(logits, -1).gather(2, w.view(-1, 1, 1).expand(-1, logits.size(1), 1)).squeeze(2).exp()


ANSWERS = {
    "06.mixture": mixture_log_probs,
    "06.rank": rank_prediction,
    "06.memory": mixture_floats,
    "06.responsibility": responsibilities,
}

WRONG = {
    "06.mixture": [_paper_style, _uniform_prior, _mixed_logits, _exp_first],
    "06.rank": [{"softmax": 3, "mos_k1": 3, "mos_k2": 6}, {"softmax": 5, "mos_k1": 5, "mos_k2": 10}],
    "06.memory": [lambda T, B, K, V, small=None: T * B * V, lambda T, B, K, V, small=None: T * B * K * V],
    "06.responsibility": [_prior_only, _over_words],
}
