r"""Text from any language model: sampling (greedy, temperature, top-k, nucleus) and beam search.

Everything here talks to a model only through the step interface of :mod:`lmcourse.lm`::

    state = model.start(B); logp = model.next_log_probs(state)   # (B, V)
    state = model.advance(state, x); state = model.reorder(state, index)

so the same code drives an n-gram table, the oracle and a recurrent network. The state is opaque;
tensors made here follow the device of the log-probabilities the model returns.

Sampling draws :math:`x_t \sim \operatorname{softmax}(\log p(\cdot \mid x_{<t}) / \tau)` after
optional filtering: top-k keeps the ``k`` most probable tokens (Fan et al. 2018, "Hierarchical
Neural Story Generation"); nucleus (top-p) sampling keeps the smallest set of most probable tokens
whose probability reaches ``p`` (Holtzman et al. 2020, "The Curious Case of Neural Text
Degeneration"). Filters act on the temperature-scaled distribution, temperature first.

Beam search keeps the ``K`` best prefixes by :math:`\sum_t \log p(x_t \mid x_{<t})`; with a length
penalty :math:`\alpha` finished hypotheses are ranked by
:math:`\log p(y) / \mathrm{lp}(y)`, :math:`\mathrm{lp}(y) = ((5 + |y|) / 6)^\alpha`
(Wu et al. 2016, "Google's Neural Machine Translation System", eq. 14).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence, Union

import torch

from ..lm import LanguageModel

Prompt = Union[None, str, Sequence[int], torch.Tensor]
DEFAULT_SEED = 0


class Beam(NamedTuple):
    """One beam-search result: the generated ids (prompt excluded) and their total log-probability."""

    ids: list
    logprob: float


# ----------------------------------------------------------------------------------- validation

def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}.")
    return value


def _check_sampling(temperature, top_k, top_p) -> None:
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}.")
    if not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}.")
    if top_k is not None:
        _check_int(top_k, "top_k", 1)
    if top_p is not None:
        if not isinstance(top_p, (int, float)) or isinstance(top_p, bool):
            raise TypeError(f"top_p must be a number in (0, 1], got {type(top_p).__name__}.")
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1] (1 keeps every token), got {top_p}.")


# --------------------------------------------------------------------------------------- prompt

def _check_model(model) -> None:
    needed = ("vocab", "start", "next_log_probs", "advance", "reorder")
    if not all(hasattr(model, name) for name in needed):
        raise TypeError(f"Expected a language model (with vocab, start, next_log_probs, advance and reorder), "
                        f"got {type(model).__name__}: pass a fitted NGramLM, an RNNLM or the Oracle.")


def is_char_vocab(vocab) -> bool:
    """A character vocabulary: every token is a single character."""
    return all(len(s) == 1 for s in vocab.itos)


def encode_prompt(model: LanguageModel, prompt: Prompt) -> list:
    """Turn a prompt into a list of ids.

    A string is split into characters for a character vocabulary; for a word vocabulary into
    whitespace-separated words, with every line break read as ``<eos>`` (the inverse of
    ``Vocab.to_text``). A list or tensor of ids is checked against the vocabulary size.
    """
    _check_model(model)
    vocab = model.vocab
    if prompt is None:
        return []
    if isinstance(prompt, str):
        if is_char_vocab(vocab):
            tokens = list(prompt)
        else:
            eos = vocab.itos[vocab.eos]
            tokens = [w for i, line in enumerate(prompt.split("\n")) for w in ([eos] if i else []) + line.split()]
        try:
            return vocab.encode(tokens).tolist()
        except KeyError as err:
            raise ValueError(err.args[0]) from None
    ids = torch.as_tensor(prompt)
    if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError("The prompt must be a string, a 1-D list of integer ids or None.")
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= len(vocab)):
        raise ValueError(f"The prompt holds ids outside the vocabulary of {len(vocab)} tokens: "
                         "encode it with the model's own vocabulary.")
    return ids.long().tolist()


def _read_prompt(model: LanguageModel, prompt_ids: list, batch_size: int):
    """Start ``batch_size`` rows, read the prompt into each; return (state, logp (B, V))."""
    state = model.start(batch_size)
    logp = model.next_log_probs(state)  # (B, V)
    if not prompt_ids:
        return state, logp
    prompt = torch.tensor(prompt_ids, dtype=torch.long, device=logp.device)  # (P,)
    for x in prompt:  # the interface reads one token per call
        state = model.advance(state, x.repeat(batch_size))  # (B,)
    return state, model.next_log_probs(state)


# ------------------------------------------------------------------------------------ filtering

def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    r"""Keep the ``k`` largest entries of each row, set the rest to :math:`-\infty`.  (B, V) -> (B, V)"""
    k = min(k, logits.shape[-1])
    _, keep = logits.topk(k, dim=-1)  # (B, k)
    mask = torch.ones_like(logits, dtype=torch.bool).scatter_(-1, keep, False)
    return logits.masked_fill(mask, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    r"""Nucleus filter: keep the smallest set of top tokens with :math:`\sum \pi_i \ge p`.

    With tokens sorted by probability :math:`\pi_{(1)} \ge \pi_{(2)} \ge \dots`, token ``(j)`` stays
    when :math:`\sum_{i<j} \pi_{(i)} < p`; the first token always stays.  (B, V) -> (B, V)
    """
    probs = torch.softmax(logits.double(), dim=-1)  # (B, V)
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V)
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, V)
    drop_sorted = mass_before >= p
    drop_sorted[..., 0] = False
    drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)  # (B, V)
    return logits.masked_fill(drop, float("-inf"))


def _scaled_by_temperature(logp: torch.Tensor, temperature: float) -> torch.Tensor:
    r""":math:`(\log p - \max \log p) / \tau`, and its limit :math:`\tau \to 0` where :math:`1/\tau` overflows.

    Shifting by the best log-probability keeps a tiny temperature finite. CUDA divides by a number through its
    reciprocal, which is infinite below :math:`\tau \approx 5.6 \times 10^{-309}` (and 0 times infinity is NaN):
    there the limit is taken directly, 0 at the best tokens and :math:`-\infty` elsewhere, on every device.
    (B, V) float64 -> (B, V) float64
    """
    best = logp.amax(dim=-1, keepdim=True)  # (B, 1)
    finite_best = torch.isfinite(best)  # (B, 1); a row without any finite log-probability stays -inf
    if math.isinf(1.0 / temperature):
        return torch.where((logp == best) & finite_best, 0.0, float("-inf")).to(logp.dtype)  # (B, V)
    return (logp - torch.where(finite_best, best, torch.zeros_like(best))) / temperature  # (B, V)


def sampling_distribution(logp: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                          top_p: Optional[float] = None) -> torch.Tensor:
    r"""The distribution a sampler draws from: :math:`\operatorname{softmax}(\mathrm{filter}(\log p / \tau))`.

    ``temperature`` must be > 0 here (greedy decoding takes the argmax instead).  (B, V) -> (B, V) float64
    """
    _check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        raise ValueError("temperature 0 is greedy decoding and has no distribution: use a temperature > 0.")
    logits = _scaled_by_temperature(logp.double(), temperature)  # (B, V)
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None and top_p < 1:
        logits = top_p_filter(logits, top_p)
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    if not bool(torch.isfinite(probs).all()):
        raise ValueError("The model gives no token a finite log-probability after this context: "
                         "use a smoothed model or another prompt.")
    return probs


# ------------------------------------------------------------------------------------- sampling

def _default_generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def _draw(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw per row from ``probs`` (B, V), made on the generator's device. -> (B,)"""
    x = torch.multinomial(probs.to(generator.device), 1, generator=generator)  # (B, 1)
    return x.squeeze(1).to(probs.device)


def _cut_at_eos(tokens: torch.Tensor, eos: int) -> list:
    """Rows of ``tokens`` (B, T) as lists, each cut just after its first ``eos``."""
    is_eos = tokens == eos  # (B, T)
    has_eos = is_eos.any(dim=1)  # (B,)
    first = is_eos.int().argmax(dim=1)  # (B,)
    lengths = torch.where(has_eos, first + 1, torch.full_like(first, tokens.shape[1]))  # (B,)
    return [row[:n] for row, n in zip(tokens.tolist(), lengths.tolist())]


def sample(model: LanguageModel, prompt: Prompt = None, max_tokens: int = 50, temperature: float = 1.0,
           top_k: Optional[int] = None, top_p: Optional[float] = None,
           generator: Optional[torch.Generator] = None, num_samples: int = 1,
           stop_at_eos: bool = False, seed: int = DEFAULT_SEED) -> list:
    r"""Draw ``num_samples`` continuations of ``prompt``, all rows in one batch.

    Each step draws :math:`x_t \sim \operatorname{softmax}(\mathrm{filter}(\log p(\cdot \mid x_{<t}) / \tau))`;
    ``temperature=0`` takes :math:`\arg\max_x \log p(x \mid x_{<t})` instead (greedy). Randomness comes
    from ``generator`` only (a fresh one seeded with ``seed`` when none is given), so equal seeds give
    equal samples. With ``stop_at_eos`` a row ends at its first ``<eos>`` (kept as its last id).
    Returns a list of ``num_samples`` lists of generated ids, the prompt excluded.
    """
    _check_sampling(temperature, top_k, top_p)
    _check_int(max_tokens, "max_tokens", 0)
    _check_int(num_samples, "num_samples", 1)
    _check_int(seed, "seed", 0)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}: "
                        "pass torch.Generator().manual_seed(seed), or give seed=... instead.")
    prompt_ids = encode_prompt(model, prompt)
    if max_tokens == 0:
        return [[] for _ in range(num_samples)]
    state, logp = _read_prompt(model, prompt_ids, num_samples)
    if temperature > 0 and generator is None:
        generator = _default_generator(logp.device, seed)
    eos = model.vocab.eos if stop_at_eos else None
    done = torch.zeros(num_samples, dtype=torch.bool, device=logp.device)  # (B,)
    steps = []
    for t in range(max_tokens):
        if temperature == 0:
            x_t = logp.argmax(dim=-1)  # (B,)
        else:
            x_t = _draw(sampling_distribution(logp, temperature, top_k, top_p), generator)  # (B,)
        steps.append(x_t)
        if eos is not None:
            done |= x_t == eos
            if bool(done.all()):
                break
        if t + 1 < max_tokens:
            state = model.advance(state, x_t)
            logp = model.next_log_probs(state)  # (B, V)
    tokens = torch.stack(steps, dim=1)  # (B, T)
    return _cut_at_eos(tokens, eos) if eos is not None else tokens.tolist()


def greedy(model: LanguageModel, prompt: Prompt = None, max_tokens: int = 50, stop_at_eos: bool = False) -> list:
    r"""The greedy continuation :math:`x_t = \arg\max_x \log p(x \mid x_{<t})` as a list of ids."""
    return sample(model, prompt, max_tokens=max_tokens, temperature=0, stop_at_eos=stop_at_eos)[0]


# ---------------------------------------------------------------------------------- beam search

def _length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    r""":math:`\mathrm{lp}(n) = ((5 + n) / 6)^\alpha` (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length.double()) / 6.0) ** alpha


class _Finished:
    """The best ``size`` complete hypotheses seen so far, ranked by penalised score."""

    def __init__(self, size: int, alpha: float):
        self.size, self.alpha, self.items = size, alpha, []  # items: (score, logprob, ids)

    def add(self, tokens: torch.Tensor, logprob: torch.Tensor) -> None:
        """Add hypotheses ``tokens`` (n, T) with total log-probabilities ``logprob`` (n,)."""
        if tokens.shape[0] == 0:
            return
        lengths = torch.full_like(logprob, tokens.shape[1])
        score = logprob / _length_penalty(lengths, self.alpha)  # (n,)
        self.items += list(zip(score.tolist(), logprob.tolist(), tokens.tolist()))
        self.items = sorted(self.items, key=lambda item: -item[0])[: self.size]

    def beats(self, best_live: float, max_len: int) -> bool:
        """True when no live prefix can still enter the list.

        A live prefix's log-probability only falls as it grows and is <= 0, so its penalised score
        is at most ``best_live / lp(max_len)`` (alpha >= 0).
        """
        if len(self.items) < self.size:
            return False
        bound = best_live / float(_length_penalty(torch.tensor(max_len), self.alpha))
        return bound <= self.items[-1][0]

    def results(self) -> list:
        return [Beam(ids, logprob) for _, logprob, ids in self.items]


def beam_search(model: LanguageModel, prompt: Prompt = None, beam_size: int = 5, max_tokens: int = 30,
                length_penalty: float = 0.0, stop_at_eos: bool = True) -> list:
    r"""The ``beam_size`` most probable continuations found by beam search, best first.

    Each step extends every live prefix :math:`y` by every token and keeps the ``K`` best by
    :math:`\log p(y) + \log p(x \mid y)`, batched over the beams (``reorder`` picks the surviving
    rows). With ``stop_at_eos`` a candidate ending in ``<eos>`` that ranks among the top ``K`` is set
    aside as finished; search stops when no live prefix can beat the ``K`` finished ones, or after
    ``max_tokens``, when the live prefixes join the finished ones. Ranking uses
    :math:`\log p(y) / ((5 + |y|)/6)^\alpha` with :math:`\alpha` = ``length_penalty``.
    Returns a list of ``Beam(ids, logprob)`` (prompt excluded).
    """
    _check_int(beam_size, "beam_size", 1)
    _check_int(max_tokens, "max_tokens", 0)
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)) \
            or not (math.isfinite(length_penalty) and length_penalty >= 0):
        raise ValueError("length_penalty must be a finite number >= 0 (0 ranks by total log-probability), "
                         f"got {length_penalty!r}.")
    prompt_ids = encode_prompt(model, prompt)
    if max_tokens == 0:
        return [Beam([], 0.0)]
    state, logp = _read_prompt(model, prompt_ids, 1)
    device, V = logp.device, logp.shape[-1]
    eos = model.vocab.eos if stop_at_eos else None
    finished = _Finished(beam_size, float(length_penalty))
    scores = torch.zeros(1, dtype=torch.float64, device=device)  # (K,) log p(y) of live prefixes
    history = torch.zeros(1, 0, dtype=torch.long, device=device)  # (K, t)
    for t in range(max_tokens):
        cand = (scores[:, None] + logp.double()).reshape(-1)  # (K*V,)
        top_scores, top_index = cand.topk(min(2 * beam_size, cand.numel()))  # (C,)
        row, x_t = torch.div(top_index, V, rounding_mode="floor"), top_index % V  # (C,)
        possible = torch.isfinite(top_scores)  # (C,)
        ranked = torch.arange(top_scores.numel(), device=device)  # (C,)
        if eos is not None:
            ends = (x_t == eos) & possible & (ranked < beam_size)
            finished.add(torch.cat([history[row[ends]], x_t[ends, None]], dim=1), top_scores[ends])
            possible &= x_t != eos
        live = possible.nonzero().squeeze(1)[:beam_size]  # (K',)
        if live.numel() == 0:
            break
        row, x_t, scores = row[live], x_t[live], top_scores[live]
        history = torch.cat([history[row], x_t[:, None]], dim=1)  # (K', t+1)
        if t + 1 == max_tokens:
            finished.add(history, scores)  # out of length: the live prefixes compete as they are
            break
        if finished.beats(float(scores[0]), max_tokens):
            break
        state = model.advance(model.reorder(state, row), x_t)
        logp = model.next_log_probs(state)  # (K', V)
    return finished.results()


# ----------------------------------------------------------------------------------- rendering

def text(model: LanguageModel, ids) -> str:
    """Readable text of ``ids`` in the model's vocabulary."""
    return model.vocab.to_text(ids)


def generate_text(model: LanguageModel, prompt: Prompt = None, method: str = "sample", **kwargs) -> str:
    """The prompt followed by one continuation, as text.

    ``method`` is ``"sample"`` (keywords of :func:`sample`), ``"greedy"`` (of :func:`greedy`) or
    ``"beam"`` (of :func:`beam_search`; the best beam is shown).
    """
    if kwargs.get("num_samples", 1) != 1:
        raise ValueError("generate_text renders one continuation: call sample(..., num_samples=n) for several.")
    if method == "sample":
        ids = sample(model, prompt, **kwargs)[0]
    elif method == "greedy":
        ids = greedy(model, prompt, **kwargs)
    elif method == "beam":
        ids = beam_search(model, prompt, **kwargs)[0].ids
    else:
        raise ValueError(f"method must be 'sample', 'greedy' or 'beam', got {method!r}.")
    return text(model, encode_prompt(model, prompt) + ids)
