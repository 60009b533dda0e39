r"""The course's one notation: its symbols, its sign for changes, and the card that introduces a corpus.

Everything a lesson writes about a quantity uses the symbol of :data:`SYMBOLS`, one symbol per quantity,
the papers' where they agree (where they clash, the table says which paper's meaning the course keeps);
``docs/notation.md`` is this module written out (``python -m lmcourse.course.notation page``), and
``tests/test_notation.py`` fails when the two differ.

**Changes.** One sign, everywhere: a change is *new* against *old*,

.. math::

    \Delta = \frac{\text{new}}{\text{old}} - 1 \quad\text{(in percent of old)},

**negative is better** (lower perplexity, lower loss). :func:`change` formats it (``"−2.8%"``), from two
numbers or from two lists of per-seed scores (their means, as :func:`lmcourse.course.seeds.gap`); a change
in nats per token is a difference, new − old, formatted by :func:`difference`. A lesson says "a change of
−2.8%" or "2.8% lower", never "a gain of 2.8%", "a 2.8% reduction" or a ratio "0.972 times".

**The corpus card.** Wherever a lesson reads a corpus (or changes to another one), :func:`corpus_card`
prints the same few lines: the corpus, its tokens per split, its vocabulary and its floor with the split
named (:data:`FLOORS` explains the five floors the course shows).

**Renames still to make.** ``python -m lmcourse.course.notation renames [LESSON ...]`` lists, cell by cell,
the uses in the lessons of a symbol for another quantity than the table's (:data:`RENAMES`).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from .catalog import REPO, lesson_id, lessons
from ..lm import perplexity
from ..corpora.grammar import Params
from ..corpora.oracle import Oracle
from ..ngram.model import NGramLM

__all__ = ["Symbol", "SYMBOLS", "symbols", "relative_change", "change", "difference", "MINUS", "Floor", "FLOORS",
           "floor_of", "card_text", "corpus_card", "Rename", "RENAMES", "renames", "page", "PAGE"]

PAGE = REPO / "docs" / "notation.md" if REPO is not None else None  # None in an installed package: no docs/ there
MINUS = "\u2212"  # a true minus sign: "−2.8%"


# ----------------------------------------------------------------------------------------------- the symbols

@dataclass(frozen=True)
class Symbol:
    tex: str  # as written in a lesson's Markdown, without the dollars
    means: str
    lessons: str  # where it appears ("all", "02, 03", ...)
    source: str = ""  # whose notation it is, when a paper's
    instead: str = ""  # what a lesson wrote for it before, to be renamed


SYMBOLS: tuple[tuple[str, tuple[Symbol, ...]], ...] = (
    ("Text and probabilities", (
        Symbol("x_t", "the token at position $t$ of a stream; $x_{<t}$ the tokens before it", "all"),
        Symbol("V", "the vocabulary's size (the number of word types)", "all", instead="01: $|V|$"),
        Symbol("u, v, w", "words of the vocabulary (types, not positions); $v$ also an $n$-gram's history, one "
               "word or $n-1$ of them", "all", instead="01: $h$ for the history"),
        Symbol("p(w \\mid x_{<t})", "a model's probability that the next token is $w$", "all"),
        Symbol("n", "an $n$-gram's order", "01, 09"),
        Symbol("N", "how many terms a count or a mean runs over: tokens scored, rows (contexts) of a matrix", "all"),
        Symbol("T", "a window's length in tokens (`bptt`); in lesson 09 drawn anew for each window", "02, 08, 09",
               instead="09: $\\ell$ for a drawn length"),
        Symbol("B", "the batch: the number of columns the stream is cut into", "02, 03, 06"),
        Symbol("\\mathcal{L}", "a loss: the mean negative log-likelihood, in nats per token; $\\mathcal{L}_k$ the "
               "validation loss after epoch $k$ (NT-ASGD)", "02, 03, 04, 08, 09", instead="04, 08, 09: $L$, $L_k$"),
        Symbol("c(v\\,w),\\ D,\\ \\gamma(v),\\ N_{1+}", "lesson 01's counting: a count, a discount, a back-off "
               "weight, the number of distinct continuations", "01", "Chen & Goodman 1999"),
        Symbol("D^{(n)}", "Kneser-Ney's one discount at order $n$ ($D^{(1)}$ for the unigram level, "
               "$D^{(2)}$ for bigrams)", "01", "Chen & Goodman 1999", instead="01: `D1`, `D2` in code"),
        Symbol("D_1,\\ D_2,\\ D_{3+}", "modified Kneser-Ney's three discounts of one order, for $n$-grams seen "
               "once, twice, three times or more", "01", "Chen & Goodman 1999"),
    )),
    ("The LSTM", (
        Symbol("h_t", "a layer's output at step $t$; the last layer's is what the softmax, the cache and attention "
               "read", "02-10", instead="04, 05, 06: $g_t$ for the last layer's output"),
        Symbol("c_t", "the cell state", "02, 02b"),
        Symbol("i_t,\\ f_t,\\ g_t,\\ o_t", "the input gate, the forget gate, the cell's candidate, the output gate "
               "(PyTorch's order)", "02, 02b, 03"),
        Symbol("\\sigma", "the logistic sigmoid, and nothing else (a singular value is $\\mathrm{sv}_k$, a spread "
               "over seeds is written sd)", "02, 02b"),
        Symbol("W_{ih},\\ W_{hh}", "a layer's input and recurrent matrices, the four gates stacked ($4d_h$ rows)",
               "02, 03"),
        Symbol("d_h", "an LSTM layer's width (its hidden units)", "02, 03, 04",
               instead="02, 03, 04: $H$ for the width"),
        Symbol("L", "the number of layers (LSTM or Transformer)", "04, 10"),
        Symbol("\\kappa", "the bound of gradient clipping: $\\nabla \\leftarrow \\nabla \\min(1, \\kappa / "
               "\\lVert\\nabla\\rVert)$", "02, 09", instead="02: $\\tau$"),
    )),
    ("Sampling", (
        Symbol("\\tau", "the sampling temperature, $p_\\tau(w) \\propto p(w)^{1/\\tau}$", "02b"),
        Symbol("k", "the words top-$k$ sampling keeps (a beam's width is said in words, \"5 beams\")", "02b",
               instead="02b: $K$ for the beam's width"),
    )),
    ("Dropout and regularisation", (
        Symbol("p", "a dropout rate: a unit (or word, or weight) is dropped with probability $p$ and the kept "
               "ones are scaled by $1/(1-p)$", "03, 09", "Srivastava et al. 2014"),
        Symbol("m", "a dropout mask (entries $\\sim$ Bernoulli$(1-p)$): $m_t$ drawn per step, $m_v$ per word type",
               "03"),
        Symbol("M_{hh}", "weight drop's mask over $W_{hh}$, one draw per forward pass", "03", "Merity et al. 2018",
               instead="03: $M$"),
        Symbol("\\alpha_{\\mathrm{AR}},\\ \\beta_{\\mathrm{TAR}}", "the weights of activation and temporal "
               "activation regularisation (the awd-lstm-lm's `--alpha`, `--beta`)", "03, 09", "Merity et al. 2018",
               instead="03: $\\alpha$, $\\beta$"),
    )),
    ("Embeddings, the softmax and its bottleneck", (
        Symbol("d", "the softmax's dimension: the width of the context vector it reads, and of the word vectors "
               "where they are tied to it (03, 04); a mixture's softmaxes each read a vector of $d$ (06, 09); a "
               "Transformer layer's width is $d_{\\text{model}}$ (10)", "03-10",
               instead="04: $E$ for this width"),
        Symbol("E", "the input embedding, a $V \\times d$ matrix; $e_w$ its row for word $w$", "03, 04, 06"),
        Symbol("W", "the output embedding (the softmax's weights), $V \\times d$; tied: $W = E$", "04, 05, 06",
               "Press & Wolf 2017"),
        Symbol("b", "a bias vector: $b_w$ the softmax's for word $w$, $b_f$ the forget gate's", "02, 04, 05, 06"),
        Symbol("z_t", "the logits at step $t$, $z_t = W h_t + b$ ($V$ numbers)", "05, 07"),
        Symbol("A", "the true log-probabilities, $N \\times V$: $A_{iw} = \\log p^*(w \\mid \\text{context } i)$",
               "05, 06", "Yang et al. 2018"),
        Symbol("H", "the $N \\times d$ matrix of contexts (row $i$: the vector the softmax reads for context $i$); "
               "$\\operatorname{rank}(H W^\\top) \\le d$", "05, 06", "Yang et al. 2018"),
        Symbol("\\nu_i", "the log-normaliser of row $i$, $\\log\\sum_u e^{z_{iu}}$ (a row shift)", "05",
               instead="05: $\\lambda_i$"),
        Symbol("\\mathrm{sv}_k", "the $k$-th largest singular value of a matrix, as in $\\mathrm{sv}_1(A)$", "05, 06",
               instead="05: $\\sigma_i(\\cdot)$"),
    )),
    ("The mixture of softmaxes", (
        Symbol("K", "the number of softmaxes (experts) mixed", "06, 09", "Yang et al. 2018"),
        Symbol("\\pi_{t,k}", "the prior: softmax $k$'s weight at step $t$, $\\pi_t = \\operatorname{softmax}(W_\\pi "
               "h_t)$", "06", "Yang et al. 2018"),
        Symbol("h_{t,k}", "the $k$-th latent context, $\\tanh(W_{h,k} h_t + b_{h,k})$", "06", "Yang et al. 2018"),
    )),
    ("The neural cache", (
        Symbol("\\theta", "the cache's sharpness (the paper's \"flatness\"): scores are $\\theta\\, h_t \\cdot h_i$; "
               "$\\theta = 0$ is the unigram cache", "07, 09, 10", "Grave et al. 2017",
               instead="02, 08, 09: $\\theta$ for the weights"),
        Symbol("a_i", "the weight on stored position $i$: $\\operatorname{softmax}_i(\\theta\\, h_t \\cdot h_i)$",
               "07, 09, 10"),
        Symbol("\\lambda", "the cache's interpolation weight: $p = (1-\\lambda)\\, p_{\\text{model}} + \\lambda\\, "
               "p_{\\text{cache}}$", "07, 08, 09", "Grave et al. 2017",
               instead="05: the row shift; 08: the decay"),
        Symbol("\\alpha", "the offset of global normalisation, $e^{\\theta h_t \\cdot h_i + \\alpha}$ beside "
               "$e^{z_{t,w}}$", "07", "Grave et al. 2017"),
        Symbol("\\omega", "a window: how many past positions the cache (or a windowed attention layer) reads",
               "07, 09, 10", instead="07: $n$; 10: $w$"),
    )),
    ("Dynamic evaluation and training", (
        Symbol("\\varphi", "the model's weights, all of them as one vector; $\\varphi_0$ the trained weights, "
               "$\\bar\\varphi$ the averaged iterate of ASGD", "02, 08, 09", instead="02, 08, 09: $\\theta$"),
        Symbol("\\eta", "a learning rate (SGD, NT-ASGD, dynamic evaluation's step)", "02, 08, 09"),
        Symbol("n_{\\mathrm{nm}}", "NT-ASGD's patience, the non-monotone interval (the awd-lstm-lm's `nonmono`)",
               "09", "Merity et al. 2018 (their $n$)", instead="09: $n$"),
        Symbol("\\rho", "dynamic evaluation's decay, the pull back towards $\\varphi_0$", "08, 09",
               "Krause et al. 2018 (their $\\lambda$)", instead="08: $\\lambda$"),
        Symbol("s_i", "the $i$-th segment of the test stream, scored and then learned from", "08",
               "Krause et al. 2018"),
        Symbol("\\nabla_\\varphi \\mathcal{L}", "the gradient (never $g$, the cell's candidate)", "02, 08",
               instead="02, 08: $g$"),
        Symbol("\\mathrm{MS}", "the root mean square of a weight's gradients over the training text; $\\epsilon$ keeps its "
               "division finite", "08", "Krause et al. 2018"),
    )),
    ("Attention", (
        Symbol("X", "a layer's inputs, one row per position ($T \\times d$)", "10"),
        Symbol("\\mathbf{Q},\\ \\mathbf{K},\\ \\mathbf{V}", "the queries, keys and values, $X W_Q$, $X W_K$, $X W_V$ "
               "(bold: plain $K$ and $V$ are the mixture's count and the vocabulary's size); their rows "
               "$\\mathbf{q}_t, \\mathbf{k}_i, \\mathbf{v}_i$",
               "10", "Vaswani et al. 2017", instead="10: plain $Q, K, V$"),
        Symbol("M", "the causal mask: $0$ where $i \\le t$, $-\\infty$ where $i > t$", "10"),
        Symbol("d_{\\text{model}}", "a Transformer layer's width: the numbers each position carries between its "
               "blocks", "10", "Vaswani et al. 2017"),
        Symbol("d_k", "a head's width, $d_{\\text{model}}$ divided by the number of heads", "10", "Vaswani et al. 2017"),
        Symbol("W_O", "the projection that joins the heads", "10", "Vaswani et al. 2017"),
    )),
)


def symbols() -> list[Symbol]:
    """Every symbol of the table, in its order."""
    return [s for _, group in SYMBOLS for s in group]


# ----------------------------------------------------------------------------------------------- changes

Number = Union[float, int, Sequence[float]]


def _mean(x: Number, what: str) -> float:
    if isinstance(x, (int, float)):
        value = float(x)
    else:
        values = [float(v) for v in x]
        if not values:
            raise ValueError(f"{what} is an empty list: give a number, or one score per seed.")
        value = statistics.mean(values)
    if not math.isfinite(value):
        raise ValueError(f"{what} is {value}, not a finite number: a change needs two finite scores.")
    return value


def relative_change(new: Number, old: Number) -> float:
    r"""The change of ``new`` against ``old``, :math:`\text{new}/\text{old} - 1` (a fraction: -0.028 is
    -2.8%); each side a number or a list of per-seed scores (its mean). Negative: ``new`` is lower."""
    n, o = _mean(new, "the new score"), _mean(old, "the old score")
    if o <= 0:
        raise ValueError(f"the old score is {o}; a change in percent needs a positive one (a perplexity, a loss "
                         "above zero): use difference() for a change in nats.")
    return n / o - 1


def _signed(value: float, digits: int) -> str:
    text = f"{value:+.{digits}f}"
    if float(text) == 0:
        return text[1:]  # "0.0": no sign on nothing
    return text.replace("-", MINUS)


def change(new: Number, old: Number, digits: int = 1) -> str:
    """The course's one way to write a change: ``"−2.8%"`` (new against old, in percent of old, signed,
    negative is better). ``new`` and ``old`` are numbers or lists of per-seed scores (their means)."""
    return _signed(100 * relative_change(new, old), digits) + "%"


def difference(new: Number, old: Number, unit: str = "nats", digits: int = 3) -> str:
    """A change as a difference, new − old, signed: ``"−0.031 nats"`` (a change of a loss per token)."""
    text = _signed(_mean(new, "the new score") - _mean(old, "the old score"), digits)
    return f"{text} {unit}".strip()


# ----------------------------------------------------------------------------------------------- floors

@dataclass(frozen=True)
class Floor:
    shown: str  # as the lessons print it
    where: str  # the lessons (and cells) that show it
    variant: str  # the corpus variant, and how a lesson loads it
    split: str  # which tokens
    why: str  # one sentence


FLOORS: tuple[Floor, ...] = (
    Floor("21.31", "01 (its take-away and the results table's oracle row)",
          "the embedded corpus's default variant, `load_corpus(\"embedded\")`: 1,000,014 training tokens, 9,929 words",
          "test, all 80,007 tokens (validation: 21.44)",
          "The exact perplexity of the program that wrote the default corpus, on its whole test text."),
    Floor("21.2", "02 (the legend of the clipping and twin-training figures)",
          "the same default variant",
          "the first 20,000 validation tokens (`STEP_VALID`; 21.22 to two decimals)",
          "The same program on a shorter piece of the validation text, printed to one decimal: another text, "
          "so another number."),
    Floor("13.32", "02b, 03, 04, 07, 08, 09, 10 (the course model's lessons)",
          "the course model's variant, `course_model.ladder_corpus(course_model.ladder_params(scale))` "
          "(`embedded-2017-7a760ccc95`): 40,011 training tokens, 1,599 words",
          "test, all 10,003 tokens (validation: 13.42)",
          "The course model's variant is another language, with fewer words to choose from at each step (1,599 "
          "against 9,929), so its exact perplexity is another number, and a lower one."),
    Floor("16.6", "05 (the lookup-rich variant's corpus card, before its trained models)",
          "the lookup-rich variant, `rank_runs.lookup_rich(300_000, 40_000)` (`embedded-2017-9501dc8d4c`): "
          "300,011 training tokens, 719 words",
          "validation, all 40,004 tokens (16.63 to two decimals)",
          "The lookup-rich variant, where one token in ten is a value drawn from a full-rank table, has a floor "
          "of its own, here on its validation text. The curves of lessons 05 and 06, scored on its first 10,000 "
          "validation tokens, draw the oracle on those tokens instead: 16.8."),
    Floor("17.08", "06 (the table of test perplexity by kind of token, row \"all\")",
          "the same lookup-rich variant",
          "test, all 40,011 tokens (validation: 16.63)",
          "The same variant as lesson 05's 16.6, on its test text instead of its validation text."),
)


def _is_embedded(corpus) -> bool:
    return str(getattr(corpus, "name", "")).startswith("embedded")


def floor_of(corpus, params=None, splits: Sequence[str] = ("valid", "test")) -> dict[str, float]:
    """The floor of each split: the oracle's perplexity on an embedded corpus (``params``: its variant's,
    the default variant's when None), the modified Kneser-Ney 5-gram's on a real one (fitted on ``train``,
    reading the text as one stream like the neural models)."""

    if _is_embedded(corpus):

        model = Oracle(corpus.vocab, params if params is not None else Params())
    else:

        model = NGramLM(corpus.vocab, 5, smoothing="mkn", mode="stream").fit(corpus.train)
    return {s: perplexity(model, getattr(corpus, s)) for s in splits}


def card_text(corpus, floor: Mapping[str, float], kind: Optional[str] = None, what: str = "") -> str:
    """The corpus card as text (see :func:`corpus_card`)."""
    kind = kind or ("oracle" if _is_embedded(corpus) else "KN5")
    if not floor:
        raise ValueError("the card needs the floor of at least one split, e.g. {'valid': 13.42, 'test': 13.32}.")
    unknown = set(floor) - {"train", "valid", "test"}
    if unknown:
        raise ValueError(f"{sorted(unknown)} is not a split: name the floors 'train', 'valid' or 'test'.")
    splits = " · ".join(f"{s} {len(getattr(corpus, s)):,}" for s in ("train", "valid", "test"))
    label = {"oracle": "the oracle (exact; no model beats it on average)",
             "KN5": "the KN5 baseline (real text has no oracle)"}.get(kind, kind)
    floors = " · ".join(f"{s} {float(v):.2f}" for s, v in floor.items())
    name = str(corpus.name) + (f": {what}" if what else "")
    head = "floor   " if kind == "oracle" else "baseline"  # a floor no model beats; a baseline to beat
    return "\n".join([f"corpus      {name}", f"tokens      {splits}", f"vocabulary  {len(corpus.vocab):,} words",
                      f"{head}    {label}: {floors}"])


def corpus_card(corpus, floor: Optional[Mapping[str, float]] = None, *, params=None, kind: Optional[str] = None,
                what: str = "") -> None:
    """Print the corpus card, the same four lines wherever a lesson reads a corpus::

        corpus      embedded-2017-7a760ccc95: the course model's variant
        tokens      train 40,011 · valid 10,014 · test 10,003
        vocabulary  1,599 words
        floor       the oracle (exact; no model beats it on average): valid 13.42 · test 13.32

    On real text the last line is ``baseline    the KN5 baseline (real text has no oracle): ...``: a number to
    beat, not a floor. ``floor`` maps splits to perplexities (the lesson's own, when it has them); without it the floor is
    computed (:func:`floor_of`, with the variant's ``params``). ``kind`` is "oracle" (embedded corpora) or
    "KN5" (real ones), ``what`` a few words after the name."""
    if floor is None:
        floor = floor_of(corpus, params)
    print(card_text(corpus, floor, kind, what))


# ----------------------------------------------------------------------------------------------- renames

@dataclass(frozen=True)
class Rename:
    what: str  # the use to rename, and into what
    pattern: str  # a regular expression over a cell's source
    lessons: tuple[str, ...]  # where the pattern means that use (elsewhere the same letters may be right)


RENAMES: tuple[Rename, ...] = (
    Rename("θ for the weights → φ (θ is the cache's sharpness)",
           r"\\theta_0|\\theta_k|\\theta_2|\\bar\\theta|\\theta\s*\\leftarrow|\\nabla_\\theta|\\lVert\\theta|theta_0",
           ("02", "08", "09")),
    Rename("λ for the decay → ρ (λ is the cache's weight)",
           r"\\lambda\\?,?\s*r\b|\\lambda\\?,?\s*\(\\theta_0|\\frac\{1\}\{\\lambda\}|\\lambda \\in \\\{1|decay \$\\lambda|"
           r"\bMS tensors[^.]*\\lambda|and \$\\lambda\$, return", ("08",)),
    Rename("λ for the row's log-normaliser → ν_i", r"\\lambda_i|\\lambda\s*\\mathbf\{1\}|\\lambda, b\b", ("05",)),
    Rename("g_t for the last layer's output → h_t (g_t is the cell's candidate)", r"\bg_t\b", ("04", "05", "06")),
    Rename("E for the width of the word vectors → d (E is the matrix)",
           r"H\s*=\s*E\b|E\s*=\s*H\b|\bV\s*E\b|V \\times E\b|V × E|\$E\$ units|size \$E\$|\$E\$ numbers", ("04",)),
    Rename("H for an LSTM layer's width → d_h (H is the matrix of contexts)",
           r"\(4H|\(3H|4H \\times H|\$H\$ units|\bH = 6|\\cdot H\b|H_\\ell|H_\{\\text\{last|unless \$H|keep \$H\$",
           ("02", "03", "04")),
    Rename("τ for the clipping bound → κ (τ is the temperature)", r"\\tau\s*/\s*\\lVert|\\tau\$ = `CLIP`", ("02",)),
    Rename("D1, D2 for KN's per-order discounts → D^(n) (D_1, D_2, D_3+ are modified KN's count classes)",
           r"\bD[12]\s*=\s*kn_discount|\bD[12] = \{kn", ("01",)),
    Rename("|V| → V", r"\|V\|", ("01",)),
    Rename("h for an n-gram's history → v (h_t is the hidden state)",
           r"\\mid h\)|\\mid h\b|c\(h\b|c\(h\\,|\(h\\,\\bullet|\\gamma\(h\)|history \$h\$", ("01",)),
    Rename("α, β for AR and TAR → α_AR, β_TAR (α is the cache's offset)",
           r"\\text\{AR\}\s*=\s*\\alpha(?!_)|\\text\{TAR\}\s*=\s*\\beta(?!_)", ("03", "09")),  # not the new names
    Rename("M for weight drop's mask → M_hh (M is the causal mask)", r"M \\odot W_\{hh\}|M_\{ij\}|mask \$M\$ is drawn",
           ("03",)),
    Rename("K for the beam's width → words (K is the mixture's count)", r"keep the \$K\$", ("02b",)),
    Rename("n or w for a window → ω", r"reach\(L, w\)|\$w\$ before it|\$1/n\$|the \$n\$ weights|each of the \$n\$",
           ("07", "10")),
    Rename("L for a loss → ℒ (L is the number of layers)", r"\\nabla_\\theta L\b|\bL\(s_i\)|\\partial L\b", ("03", "04",
                                                                                                            "08")),
    Rename("σ_i(·) for a singular value → sv_i(·) (σ is the sigmoid)", r"\\sigma_[i1k]\(", ("05", "06")),
    Rename("d for a distance → another letter (d is the vectors' width)", r"distance\*\* \$d\$|\$d = [0-9]", ("02b",)),
    Rename("NT-ASGD's L_k, H, n, K → ℒ_k, a word for the history, n_nm, a word for the steps averaged",
           r"L_k|L_\{k|H = \(L_1|\|H\| > n|the last\* \$n\$|\\frac\{1\}\{K\}|after \$K\$ steps", ("09",)),
    Rename("ℓ for a window's length → T", r"\\ell\s*=\s*\\max|\\ell\s*/\s*\\text\{bptt\}", ("09",)),
    Rename("Q, K, V plain → bold (plain K, V are the mixture's count and the vocabulary's size)",
           r"Q = X W_Q|K = X W_K|V = X W_V|Q K\^\\top", ("10",)),
    Rename("a change written by hand (a gain, a reduction, a ratio) → change(new, old)",
           r"\{[^{}\n]*(?:1 - [^{}\n]*/|/[^{}\n]*- 1\b|gap\()[^{}\n]*:\+?\.\d%\}|\bratio\[|\b(?:agree|names)_ratio\b|"
           r"\breduction\b|\bgains?\w* = ",
           ("01", "02b", "03", "04", "05", "06", "07", "08", "09", "10")),
)


def renames(paths: Sequence[Path] = ()) -> list[dict]:
    """Every use in the lessons of a symbol for another quantity than :data:`SYMBOLS` gives it: one dict per
    cell and rename, with the lesson, the cell's 0-based position and id, the rename and what matched."""
    found = []
    for path in list(paths) or lessons():
        lesson = lesson_id(path)
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        for position, cell in enumerate(nb["cells"]):
            source = "".join(cell["source"])
            for rename in RENAMES:
                if lesson not in rename.lessons:
                    continue
                hits = sorted({m.group(0) for m in re.finditer(rename.pattern, source)})
                if hits:
                    found.append({"lesson": lesson, "cell": position, "id": cell.get("id", ""),
                                  "kind": cell["cell_type"], "rename": rename.what, "matched": hits})
    return found


# ----------------------------------------------------------------------------------------------- the page

def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def page() -> str:
    """``docs/notation.md``: this module written out."""
    lines = ["# The course's notation", "",
             "<!-- Written by `python -m lmcourse.course.notation page > docs/notation.md` from "
             "`lmcourse/course/notation.py`; tests/test_notation.py checks that the two agree. -->", "",
             "One symbol per quantity, across all the lessons. Where two papers give one letter two meanings "
             "(Grave et al.'s $\\theta$ and $\\lambda$ are the cache's, Krause et al.'s the weights and the decay), "
             "the course keeps the cache's and renames the other. A symbol defined on the spot for one derivation "
             "may be any letter that is not in this table.", ""]
    for group, items in SYMBOLS:
        lines += [f"## {group}", "", "| symbol | what it is | lessons | from | written before |", "|---|---|---|---|---|"]
        lines += [f"| ${_cell(s.tex)}$ | {_cell(s.means)} | {s.lessons} | {_cell(s.source)} | {_cell(s.instead)} |"
                  for s in items]
        lines.append("")
    lines += ["## Changes: one sign", "",
              "A change is new against old, in percent of old, **negative is better** (lower perplexity):", "",
              "$$\\Delta = \\frac{\\text{new}}{\\text{old}} - 1.$$", "",
              "Every lesson formats it with `lmcourse.course.notation.change(new, old)` (`\"−2.8%\"`; two numbers, or "
              "two lists of per-seed scores, whose means it compares). A change of a loss in nats per token is a "
              "difference, new − old, formatted by `difference(new, old)` (`\"−0.031 nats\"`). Say \"a change of "
              "−2.8%\" or \"2.8% lower\"; not \"a gain of 2.8%\", \"a 2.8% reduction\" or \"0.972 times\".", "",
              "## The corpus card", "",
              "Wherever a lesson reads a corpus, or moves to another one, it prints the same four lines with "
              "`corpus_card(corpus, floor)`:", "", "```",
              "corpus      embedded-2017-7a760ccc95: the course model's variant",
              "tokens      train 40,011 · valid 10,014 · test 10,003",
              "vocabulary  1,599 words",
              "floor       the oracle (exact; no model beats it on average): valid 13.42 · test 13.32",
              "```", "",
              "The **floor** is the oracle's perplexity on an embedded corpus: the exact probabilities of the program "
              "that wrote it, which no model beats on average. Real text has no oracle. There the last line reads "
              "`baseline` and gives the modified Kneser-Ney 5-gram's perplexity: a number to beat, not a floor. "
              "The course says \"floor\" only for the oracle. Without `floor` the card computes it (`floor_of`). "
              "It always names the split: a floor belongs to a text.", "",
              "## The five floors the course shows", "",
              "| floor | shown in | corpus variant | split |", "|---:|---|---|---|"]
    lines += [f"| {f.shown} | {_cell(f.where)} | {_cell(f.variant)} | {_cell(f.split)} |" for f in FLOORS]
    lines.append("")
    lines += [f"- **{f.shown}**: {f.why}" for f in FLOORS]
    lines += ["", "## Renames still to make", "",
              "`python -m lmcourse.course.notation renames [LESSON ...]` lists, cell by cell, where a lesson still "
              "writes a symbol for another quantity than this table's (and where it writes a change by hand).", ""]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmcourse.course.notation", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("page", "renames"))
    parser.add_argument("lessons", nargs="*", help="lesson numbers or notebook paths (default: all)")
    args = parser.parse_args(argv)
    if args.command == "page":
        sys.stdout.write(page())
        return 0
    try:
        paths = lessons(args.lessons)
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for hit in renames(paths):
        matched = ", ".join(" ".join(m.split()) for m in hit["matched"])
        print(f"{hit['lesson']:>3} c{hit['cell']:<3} {hit['id']:<12} {hit['rename']}: {matched}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
