r"""The papers' training recipes, as presets for ``python -m lmcourse train --preset NAME``.

A preset is one published recipe written out field by field, every field with the place it comes
from. A run's settings are built in three layers, each overriding the one before::

    the paper's recipe  <-  the scale's shrinking (ci, cpu)  <-  --set key=value

At the ``gpu`` scale a preset is the paper's recipe unchanged (``transformer-ptb`` is the one recipe that is the
course's own, lesson 10's regime at the AWD-LSTM's size, since no paper's Transformer recipe for PTB is published). The ``ci`` and ``cpu`` scales shrink
only what :data:`SCALABLE` lists (widths, the Transformer's feed-forward width, the number of experts, the data and the number of epochs,
with the two counts measured in epochs, ``nonmono`` and ``decay_after``): the optimizer, the
dropouts, NT-ASGD, variable BPTT, AR/TAR, the batch and window sizes stay as published.

Fields come from three places, all in one flat namespace: the config class of the recipe's model ``kind``
(registered with :func:`lmcourse.lm.register_model`: :class:`~lmcourse.networks.models.LMConfig` for
``rnnlm``, :class:`~lmcourse.networks.transformer.TransformerConfig` for ``transformer``),
:class:`~lmcourse.training.trainconfig.TrainConfig` (the training loop) and :data:`RECIPE_FIELDS`
(what neither holds: the model kind, how to initialise, how the paper normalised its loss, how much data to read).
A preset's model is built through the registry (:func:`lmcourse.lm.model_builder`), so any registered kind
whose config class is registered with it can be a preset's.

One recipe needs a conversion. Zaremba et al. (2014) sum the loss over the ``bptt`` steps of a
window (and average it over the batch); the course's trainer averages over all tokens, so its
gradient is the paper's divided by ``bptt``. Plain SGD with clipping then takes the same steps when

.. math::  \eta_{\text{trainer}} = \eta_{\text{paper}} \cdot \text{bptt}, \qquad
           c_{\text{trainer}} = c_{\text{paper}} / \text{bptt},

since :math:`\eta\,\mathrm{clip}_{c}(T g) = T\eta\,\mathrm{clip}_{c/T}(g)`. The preset keeps the
paper's numbers (``lr=1``, ``clip=5``) and :func:`train_config` converts them.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Optional

from ..config import SCALES, by_scale
from ..lm import model_config_class
from ..literature import cite, published
from ..networks.models import LMConfig
from ..networks.transformer import TransformerConfig  # noqa: F401  (importing a model's module registers its kind)
from .trainconfig import TrainConfig

__all__ = ["Preset", "PRESETS", "RECIPE_FIELDS", "SCALABLE", "get", "field_names", "parse_value",
           "parse_overrides", "resolve", "check", "model_config", "train_config", "describe", "published_rows"]

# what a scale may shrink: sizes, data, epochs and the two counts measured in epochs
SCALABLE = frozenset({"emb_size", "hidden_size", "last_size", "ffn_size", "n_experts", "epochs", "nonmono", "decay_after",
                      "train_tokens", "valid_tokens", "test_tokens"})
# TrainConfig fields that are about where a run writes and what it shows, not about the recipe
NOT_SETTINGS = frozenset({"checkpoint", "out_dir", "progress", "live_plot", "checkpoint_every", "bf16", "tf32"})

# name -> (type, default, meaning): the recipe fields that are neither LMConfig's nor TrainConfig's
RECIPE_FIELDS = {
    "kind": (str, "rnnlm", "the model kind the recipe trains (registered with lmcourse.lm.register_model)"),
    "init_all": (bool, False, "initialise every parameter uniformly in [-init_range, init_range], "
                              "the LSTM's included (else only the embedding and decoder)"),
    "loss_sum_over_time": (bool, False, "the paper's loss sums over the window's steps: lr and clip are "
                                        "converted for the trainer's per-token mean"),
    "train_tokens": (Optional[int], None, "read only the first N training tokens (None: all)"),
    "valid_tokens": (Optional[int], None, "validate on the first N validation tokens (None: all)"),
    "test_tokens": (Optional[int], None, "test on the first N test tokens (None: all)"),
}


@dataclass(frozen=True)
class Preset:
    """One recipe: its settings (every field), where each comes from, and the published numbers.

    ``scales``: ``{"ci": {...}, "cpu": {...}}``, the fields each smaller scale shrinks.
    ``published``: ``(dataset, model)`` keys of :data:`lmcourse.literature.PUBLISHED` this recipe
    reproduces. ``finetune_of``: the preset whose trained run this one continues (its best weights).
    ``evaluation``: the settings the papers scored with, ``{"cache": {...}, "dyneval": {...}}``.
    ``own``: the recipe is the course's, not a paper's; its ``published`` rows stand beside it for comparison.
    """

    name: str
    summary: str
    data: str
    settings: dict
    sources: dict
    published: tuple
    scales: dict = field(default_factory=dict)
    finetune_of: Optional[str] = None
    evaluation: dict = field(default_factory=dict)
    own: bool = False  # the course's own recipe: ``published`` rows are for comparison, not reproduced

    @property
    def kind(self) -> str:
        """The model kind the recipe trains (``rnnlm``, ``transformer``, ...)."""
        return self.settings["kind"]


# ------------------------------------------------------------------------------- building recipes

def cited(source: str, **values) -> tuple[dict, dict]:
    """``(values, {field: source})``: a group of fields that share one citation."""
    return values, dict.fromkeys(values, source)


def layers(*groups: tuple[dict, dict]) -> tuple[dict, dict]:
    """Merge cited groups left to right: a later group overrides a value and its source."""
    values, sources = {}, {}
    for v, s in groups:
        values.update(v)
        sources.update(s)
    return values, sources


AWD = cite("awd-code")
MOS = cite("mos-code")
PTE = cite("pytorch-examples")
ZAR = cite("zaremba2014")

COURSE = layers(
    cited("not a hyperparameter: the papers' recurrent language model (lmcourse.networks.models.RNNLM)", kind="rnnlm"),
    cited("not a hyperparameter: the course's fast path, torch.nn.LSTM", cell="fast"),
    cited("not a hyperparameter: whole epochs", max_batches=None),
    cited("the whole split, as the papers read it", train_tokens=None, valid_tokens=None, test_tokens=None),
    cited("no such ingredient in this recipe", head="softmax", n_experts=1, dropoutl=0.0, last_size=None,
          decay_after=None, stop_nonmono=False, small_batch_size=None, max_seq_len_delta=None, lr_decay=1.0,
          weight_decay=0.0, alpha=0.0, beta=0.0, variable_bptt=False, wdrop=0.0, dropoute=0.0, nonmono=5,
          init_all=False, loss_sum_over_time=False, head_size=None, vector_size=None, warmup=0),
    cited("no such ingredient in this recipe: no dropout on h_(t-1) inside the LSTM's loop (the course's "
          "from-the-equations cell only; Gal & Ghahramani 2016)", dropoutr=0.0, recurrent_kind="locked"),
    cited("the mixture's latent contexts as the paper writes them, tanh (Yang et al. 2018, Section 3); "
          "unused by a softmax head", mos_latent="tanh"),
)

ZAREMBA_MEDIUM = layers(
    COURSE,
    cited(f"{ZAR}, Section 4.1 (medium: two layers of 650 units)", emb_size=650, hidden_size=650, num_layers=2),
    cited(f"{ZAR} (no tying; it came later)", tie=False),
    cited(f"{ZAR}, Section 4.1 (50% dropout on the non-recurrent connections, a fresh mask every step)",
          dropout=0.5, dropouth=0.5, dropouti=0.5, dropout_kind="standard"),
    cited(f"{ZAR}, Section 4.1 (every parameter uniform in [-0.05, 0.05])", init_range=0.05, init_all=True),
    cited(f"{ZAR}, Section 4.1 (plain SGD at rate 1, minibatch 20, unrolled 35 steps, 39 epochs)",
          optimizer="sgd", lr=1.0, batch_size=20, bptt=35, epochs=39),
    cited(f"{ZAR}, Section 4.1 (after 6 epochs the rate is divided by 1.2 after each epoch; the TensorFlow "
          "tutorial multiplies by 0.8 instead)", decay_after=6, lr_decay=1.2),
    cited(f"{ZAR}, Section 4.1 (gradient norm clipped at 5)", clip=5.0),
    cited(f"{ZAR} code, main.lua (the loss sums over the 35 steps and averages over the batch)",
          loss_sum_over_time=True),
    cited(f"{ZAR} code, main.lua (validation reads the training batch of 20)", eval_batch_size=20),
    cited("none published: the course's seed", seed=1111),
)


def _pytorch_examples(size: int, p: float) -> tuple[dict, dict]:
    return layers(
        COURSE,
        cited(f"{PTE}, main.py defaults (2 layers, lr 20, clip 0.25, batch 20, bptt 35, seed 1111, "
              "validation batch 10)", num_layers=2, lr=20.0, clip=0.25, batch_size=20, bptt=35, seed=1111,
              eval_batch_size=10),
        cited(f"{PTE}, main.py (plain SGD; the rate is divided by 4 whenever validation does not improve)",
              optimizer="sgd", lr_decay=4.0),
        cited(f"{PTE}, model.py (embedding and decoder uniform in [-0.1, 0.1]; nn.Dropout on the embeddings "
              "and the output, nn.LSTM's dropout between layers: fresh masks)", init_range=0.1,
              dropout_kind="standard"),
        cited(f"{PTE}, README command (--emsize {size} --nhid {size} --dropout {p} --epochs 40 --tied)",
              emb_size=size, hidden_size=size, dropout=p, dropouth=p, dropouti=p, epochs=40, tie=True),
    )


def _awd_main(source: str) -> tuple[dict, dict]:
    """The AWD-LSTM main.py defaults (the MoS code keeps them), cited to ``source``."""
    return layers(
        COURSE,
        cited(f"{source}, main.py defaults (Merity et al. 2018, Section 5)", emb_size=400, hidden_size=1150,
              num_layers=3, dropout=0.4, dropouth=0.3, dropouti=0.65, dropoute=0.1, wdrop=0.5, lr=30.0, clip=0.25,
              epochs=8000, batch_size=80, bptt=70, alpha=2.0, beta=1.0, weight_decay=1.2e-6, nonmono=5, seed=1111),
        cited(f"{source}, main.py (always tied; locked dropout; embedding and decoder uniform in [-0.1, 0.1])",
              tie=True, dropout_kind="locked", init_range=0.1),
        cited(f"{source}, main.py (SGD, then ASGD on the non-monotone trigger; variable BPTT with the rate "
              "scaled by the window's length; validation batch 10; no --when decay)", optimizer="ntasgd",
              variable_bptt=True, eval_batch_size=10, lr_decay=1.0),
    )


AWD_MAIN = _awd_main(AWD)
AWD_PTB = layers(AWD_MAIN, cited(f"{AWD}, README (PTB command: --batch_size 20 --dropouti 0.4 --dropouth 0.25 "
                                 "--seed 141 --epoch 500)", batch_size=20, dropouti=0.4, dropouth=0.25, seed=141,
                                 epochs=500))
AWD_WT2 = layers(AWD_MAIN, cited(f"{AWD}, README (WikiText-2 command: --epochs 750 --dropouth 0.2 --seed 1882)",
                                 epochs=750, dropouth=0.2, seed=1882))
AWD_FINETUNE = cited(f"{AWD}, finetune.py (ASGD from the trained weights; windows capped at bptt + 10; stops on "
                     "the non-monotone trigger)", optimizer="asgd", max_seq_len_delta=10, stop_nonmono=True)

MOS_MAIN = layers(
    _awd_main(MOS),
    cited(f"{MOS}, main.py defaults (the AWD-LSTM training loop; windows capped at bptt + 40)",
          max_seq_len_delta=40),
    cited(f"{MOS}, model.py (a mixture of softmaxes over the tied embedding; Yang et al. 2018, Section 3)",
          head="mos"),
)
MOS_PTB = layers(MOS_MAIN, cited(
    f"{MOS}, README (PTB command: --dropouti 0.4 --dropoutl 0.29 --dropouth 0.225 --seed 28 --batch_size 12 "
    "--lr 20.0 --epoch 1000 --nhid 960 --nhidlast 620 --emsize 280 --n_experts 15)", dropouti=0.4,
    dropoutl=0.29, dropouth=0.225, seed=28, batch_size=12, lr=20.0, epochs=1000, hidden_size=960, last_size=620,
    emb_size=280, n_experts=15))
MOS_WT2 = layers(MOS_MAIN, cited(
    f"{MOS}, README (WikiText-2 command: --epochs 1000 --dropouth 0.2 --seed 1882 --n_experts 15 --nhid 1150 "
    "--nhidlast 650 --emsize 300 --batch_size 15 --lr 15.0 --dropoutl 0.29 --small_batch_size 5 "
    "--max_seq_len_delta 20 --dropouti 0.55)", epochs=1000, dropouth=0.2, seed=1882, n_experts=15,
    hidden_size=1150, last_size=650, emb_size=300, batch_size=15, lr=15.0, dropoutl=0.29, small_batch_size=5,
    max_seq_len_delta=20, dropouti=0.55))
MOS_FINETUNE = cited(f"{MOS}, finetune.py (ASGD from the trained weights, same window cap; stops on the "
                     "non-monotone trigger)", optimizer="asgd", stop_nonmono=True)



def _training_only(recipe: tuple[dict, dict]) -> tuple[dict, dict]:
    """The fields of ``recipe`` that are not the recurrent model's (the training loop's and the recipe's)."""
    values, sources = recipe
    model = {f.name for f in dataclasses.fields(LMConfig)}
    keep = [k for k in values if k not in model]
    return {k: values[k] for k in keep}, {k: sources[k] for k in keep}


LESSON10 = "lesson 10's regime, scaled (the course's own choice, not a paper's)"
# No paper's Transformer recipe for PTB is written out here: Transformer-XL reports 54.52 on PTB with 24M
# parameters (Dai et al. 2019; the row as listed in the NLP-progress language-modelling table) and gives no
# PTB training recipe in its paper, so its hyperparameters are not known to the course.
TRANSFORMER_PTB = layers(
    _training_only(COURSE),
    cited("not a hyperparameter: the course's decoder-only Transformer (lmcourse.networks.transformer)",
          kind="transformer", attention="fused"),
    cited(f"{LESSON10}: E = 512, 6 pre-norm blocks of 8 heads and a feed-forward layer of 2048, tied, which is "
          "24.0M parameters on PTB's 10,000 words, the AWD-LSTM's 24M (Merity et al. 2018, Table 1)",
          emb_size=512, num_layers=6, n_heads=8, ffn_size=2048, tie=True, head_size=None, vector_size=None),
    cited(f"{LESSON10}: a learned bias per head and distance, in the spirit of Dai et al. 2019", positions="learned"),
    cited(f"{LESSON10}: dropout at the AWD-LSTM's output rate (Merity et al. 2018, PTB command), none on the "
          "attention weights; the package's uniform range", dropout=0.4, attn_dropout=0.0, init_range=0.1),
    cited(f"{LESSON10}: the AWD-LSTM's PTB batch, window and clip (Merity et al. 2018); each token attends to the "
          "window's 70 tokens back, carried across batches", batch_size=20, bptt=70, window=70, clip=0.25,
          eval_batch_size=10),
    cited(f"{LESSON10}: Adam at 1e-3 after a linear warm-up over 200 batches, the rate halved when validation "
          "stalls; Transformer-XL's PTB recipe is not published (no PTB script), so none is copied",
          optimizer="adam", lr=1e-3, warmup=200, lr_decay=2.0),
    cited(f"{LESSON10}: 60 epochs (the best epoch's weights are kept)", epochs=60),
    cited("none published: the course's seed", seed=1111),
)

# ------------------------------------------------------------------------------- the scales

def small(family: str, scale: str) -> dict:
    """What ``scale`` shrinks in the recipes of ``family`` (only SCALABLE fields; nothing at ``gpu``, the papers')."""
    ci_data = dict(train_tokens=3000, valid_tokens=600, test_tokens=600)
    cpu_data = dict(train_tokens=100_000, valid_tokens=20_000, test_tokens=20_000)
    return {
        "lstm": by_scale(ci=dict(emb_size=16, hidden_size=16, epochs=3, decay_after=1, **ci_data),
                         cpu=dict(emb_size=200, hidden_size=200, epochs=4, decay_after=2, **cpu_data), gpu={},
                         scale=scale),
        "awd": by_scale(ci=dict(emb_size=16, hidden_size=24, epochs=4, nonmono=1, **ci_data),
                        cpu=dict(emb_size=200, hidden_size=400, epochs=4, nonmono=1, **cpu_data), gpu={},
                        scale=scale),
        "mos": by_scale(ci=dict(emb_size=16, hidden_size=24, last_size=20, n_experts=3, epochs=4, nonmono=1, **ci_data),
                        cpu=dict(emb_size=100, hidden_size=300, last_size=150, n_experts=5, epochs=3, nonmono=1,
                                 train_tokens=50_000, valid_tokens=10_000, test_tokens=10_000), gpu={},
                        scale=scale),
        "transformer": by_scale(ci=dict(emb_size=16, ffn_size=32, epochs=2, **ci_data),
                                cpu=dict(emb_size=128, ffn_size=512, epochs=4, **cpu_data), gpu={}, scale=scale),
    }[family]


# ------------------------------------------------------------------------------- evaluation settings

CACHE_PTB = dict(theta=1.0, lam=0.1, window=500, source=f"{AWD}, README (PTB pointer command)")
CACHE_WT2 = dict(theta=0.662, lam=0.1279, window=3785, source=f"{AWD}, README (WikiText-2 pointer command)")
DYNEVAL_AWD = dict(paper="AWD-LSTM", source=f"{cite('dyneval-code')}, README (the AWD-LSTM settings, old scaling)")
DYNEVAL_MOS_PTB = dict(paper="MoS, ptb", source=f"{MOS}, README (PTB dynamic evaluation: --lamb 0.075)")
DYNEVAL_MOS_WT2 = dict(paper="MoS, wikitext-2", source=f"{MOS}, README (WikiText-2 dynamic evaluation: "
                                                       "--epsilon 0.002)")


def _preset(name, summary, data, recipe, published_, family, finetune_of=None, evaluation=None,
            own=False) -> Preset:
    values, sources = recipe
    return Preset(name, summary, data, dict(values), dict(sources), tuple(published_),
                  {scale: small(family, scale) for scale in SCALES}, finetune_of,
                  evaluation or {}, own)


PRESETS: dict[str, Preset] = {p.name: p for p in [
    _preset("zaremba-medium", "2x650 LSTM with dropout, no tying (Zaremba et al. 2014)", "ptb", ZAREMBA_MEDIUM,
            [("ptb", "LSTM medium + dropout")], "lstm",
            evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_AWD}),
    _preset("pytorch-examples", "2x650 tied LSTM, dropout 0.5, 40 epochs (pytorch/examples 2017)", "ptb",
            _pytorch_examples(650, 0.5), [("ptb", "LSTM 2x650 tied, 40 epochs")], "lstm",
            evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_AWD}),
    _preset("pytorch-examples-large", "2x1500 tied LSTM, dropout 0.65, 40 epochs (pytorch/examples 2017)", "ptb",
            _pytorch_examples(1500, 0.65), [("ptb", "LSTM 2x1500 tied, 40 epochs")], "lstm",
            evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_AWD}),
    _preset("awd-lstm-ptb", "AWD-LSTM 3x1150, NT-ASGD, on PTB (Merity et al. 2018)", "ptb", AWD_PTB,
            [("ptb", "AWD-LSTM, before finetuning")], "awd",
            evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_AWD}),
    _preset("awd-lstm-ptb-finetune", "AWD-LSTM finetuning with ASGD, on PTB (Merity et al. 2018)", "ptb",
            layers(AWD_PTB, AWD_FINETUNE),
            [("ptb", "AWD-LSTM"), ("ptb", "AWD-LSTM + cache"), ("ptb", "AWD-LSTM + dynamic evaluation")], "awd",
            finetune_of="awd-lstm-ptb", evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_AWD}),
    _preset("awd-lstm-wt2", "AWD-LSTM 3x1150, NT-ASGD, on WikiText-2 (Merity et al. 2018)", "wikitext-2",
            AWD_WT2, [("wikitext-2", "AWD-LSTM, before finetuning")], "awd",
            evaluation={"cache": CACHE_WT2, "dyneval": DYNEVAL_AWD}),
    _preset("awd-lstm-wt2-finetune", "AWD-LSTM finetuning with ASGD, on WikiText-2 (Merity et al. 2018)",
            "wikitext-2", layers(AWD_WT2, AWD_FINETUNE),
            [("wikitext-2", "AWD-LSTM"), ("wikitext-2", "AWD-LSTM + cache"),
             ("wikitext-2", "AWD-LSTM + dynamic evaluation")], "awd",
            finetune_of="awd-lstm-wt2", evaluation={"cache": CACHE_WT2, "dyneval": DYNEVAL_AWD}),
    _preset("mos-ptb", "AWD-LSTM with a mixture of 15 softmaxes, on PTB (Yang et al. 2018)", "ptb", MOS_PTB,
            [("ptb", "AWD-LSTM + MoS, before finetuning")], "mos",
            evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_MOS_PTB}),
    _preset("mos-ptb-finetune", "MoS finetuning with ASGD at lr 25, on PTB (Yang et al. 2018)", "ptb",
            layers(MOS_PTB, MOS_FINETUNE, cited(f"{MOS}, README (PTB finetuning: --lr 25.0)", lr=25.0)),
            [("ptb", "AWD-LSTM + MoS"), ("ptb", "AWD-LSTM + MoS + dynamic evaluation")], "mos",
            finetune_of="mos-ptb", evaluation={"cache": CACHE_PTB, "dyneval": DYNEVAL_MOS_PTB}),
    _preset("mos-wt2", "AWD-LSTM with a mixture of 15 softmaxes, on WikiText-2 (Yang et al. 2018)", "wikitext-2",
            MOS_WT2, [("wikitext-2", "AWD-LSTM + MoS, before finetuning")], "mos",
            evaluation={"cache": CACHE_WT2, "dyneval": DYNEVAL_MOS_WT2}),
    _preset("mos-wt2-finetune", "MoS finetuning with ASGD at lr 20, on WikiText-2 (Yang et al. 2018)",
            "wikitext-2", layers(MOS_WT2, MOS_FINETUNE,
                                 cited(f"{MOS}, README (WikiText-2 finetuning: --lr 20.0)", lr=20.0)),
            [("wikitext-2", "AWD-LSTM + MoS"), ("wikitext-2", "AWD-LSTM + MoS + dynamic evaluation")], "mos",
            finetune_of="mos-wt2", evaluation={"cache": CACHE_WT2, "dyneval": DYNEVAL_MOS_WT2}),
    # No -finetune: ASGD from the trained weights is the AWD-LSTM's last step, not part of the Transformer's
    # regime. No evaluation settings either: the papers' cache and dynamic evaluation were tuned on LSTMs (lesson 10
    # found the RMS rule's rate 100 times lower on a Transformer), so `evaluate` takes the package's defaults, or
    # tunes them on valid with --tune-on valid.
    _preset("transformer-ptb", "decoder-only Transformer, 6x512, 24M tied, Adam with warm-up, on PTB (the course's "
            "regime of lesson 10; Transformer-XL's 24M row for comparison)", "ptb", TRANSFORMER_PTB,
            [("ptb", "Transformer-XL")], "transformer", own=True),
]}


# ------------------------------------------------------------------------------- fields and values

def _model_fields(kind: str = "rnnlm") -> dict:
    """The model fields of ``kind``: its registered config class's, less ``vocab_size``."""
    return {f.name: f for f in dataclasses.fields(model_config_class(kind)) if f.name != "vocab_size"}


def _train_fields() -> dict:
    return {f.name: f for f in dataclasses.fields(TrainConfig) if f.name not in NOT_SETTINGS}


def field_names(kind: str = "rnnlm") -> dict:
    """``{field: "model" | "train" | "recipe"}`` for every field a preset of model ``kind`` sets."""
    out = dict.fromkeys(_model_fields(kind), "model")
    out.update(dict.fromkeys(_train_fields(), "train"))
    out.update(dict.fromkeys(RECIPE_FIELDS, "recipe"))
    return out


def _field_type(name: str, kind: str = "rnnlm"):
    """The declared type of a field (``Optional[int]`` and the like kept as they are)."""
    if name in RECIPE_FIELDS:
        return RECIPE_FIELDS[name][0]
    cls = model_config_class(kind) if name in _model_fields(kind) else TrainConfig
    return typing.get_type_hints(cls)[name]


def get(name: str) -> Preset:
    """The preset called ``name``; a ``KeyError`` naming the presets that exist otherwise."""
    if name not in PRESETS:
        raise KeyError(f"There is no preset {name!r}: use one of {', '.join(PRESETS)}.")
    return PRESETS[name]


_NONE, _TRUE, _FALSE = ("none", "null"), ("true", "yes", "1", "on"), ("false", "no", "0", "off")
_KINDS = {int: "a whole number", float: "a number", bool: "true or false", str: "a word"}


def parse_value(name: str, text: str, model_kind: str = "rnnlm"):
    """``text`` read as the type of field ``name`` of a ``model_kind`` preset (``none`` for an optional field);
    one ValueError sentence."""
    kind = _field_type(name, model_kind)
    optional = typing.get_origin(kind) is typing.Union and type(None) in typing.get_args(kind)
    base = next(a for a in typing.get_args(kind) if a is not type(None)) if optional else kind
    raw = text.strip()
    if raw.lower() in _NONE:
        if optional:
            return None
        raise ValueError(f"--set {name}={text}: {name} cannot be none; give {_KINDS.get(base, 'a value')}.")
    try:
        if base is bool:
            if raw.lower() in _TRUE + _FALSE:
                return raw.lower() in _TRUE
            raise ValueError
        if base is int:
            try:
                return int(raw)
            except ValueError:  # "1e8": a whole number written as a float
                value = float(raw)
                if math.isfinite(value) and value.is_integer():
                    return int(value)
                raise
        if base is float:
            return float(raw)
    except ValueError:
        raise ValueError(f"--set {name}={text}: {name} takes {_KINDS.get(base, 'a value')}"
                         f"{' or none' if optional else ''}, and {text!r} is not one.") from None
    return raw


def parse_overrides(pairs, kind: str = "rnnlm") -> dict:
    """``["lr=20", "epochs=3"]`` -> ``{"lr": 20.0, "epochs": 3}``, each value read as its field's type in a preset
    of model ``kind``."""
    known, out = field_names(kind), {}
    for pair in pairs or ():
        if "=" not in pair:
            raise ValueError(f"--set {pair}: write it as key=value, e.g. --set epochs=3.")
        key, _, value = pair.partition("=")
        key = key.strip().replace("-", "_")
        if key not in known:
            close = [k for k in known if key in k or k in key] or sorted(known)
            raise ValueError(f"--set {pair}: there is no setting {key!r}; the settings are {', '.join(close)}.")
        if key == "kind" and value.strip() != kind:
            raise ValueError(f"--set {pair}: a preset's model kind is its recipe ({kind}); choose a preset of the "
                             "kind you want instead.")
        out[key] = parse_value(key, value, kind)
    return out


# ------------------------------------------------------------------------------- resolving a run

def resolve(preset: Preset, scale: str, overrides: Optional[dict] = None) -> dict:
    """Every field's value for a run: the recipe, shrunk for ``scale``, then ``overrides`` on top."""
    if scale not in SCALES:
        raise ValueError(f"scale={scale!r} is not a scale: use one of {', '.join(SCALES)}.")
    settings = dict(preset.settings)
    settings.update(preset.scales.get(scale, {}))
    settings.update(overrides or {})
    return settings


def check(settings: dict) -> None:
    """One ValueError sentence for the first setting that is unknown or out of range.

    The model and training fields are checked by building the kind's config class and
    :class:`TrainConfig` (every number finite, in range, whole where it must be); the recipe
    fields here: flags are booleans, token counts positive integers or None.
    """
    if not isinstance(settings, dict):
        raise ValueError(f"The settings must be a dict of field values, got {type(settings).__name__}.")
    kind = settings.get("kind", "rnnlm")  # a record written before presets had kinds holds an rnnlm
    if not isinstance(kind, str):
        raise ValueError(f"kind must name a registered model kind such as 'rnnlm', got {kind!r}.")
    model_config_class(kind)  # a kind nobody registered: one sentence naming the known ones
    known = field_names(kind)
    unknown = sorted(k for k in settings if k not in known)
    if unknown:
        raise ValueError(f"There is no setting {unknown[0]!r}: the settings are {', '.join(sorted(known))}.")
    for name, (type_, _, _) in RECIPE_FIELDS.items():
        value = settings.get(name)
        if type_ is str:
            continue  # the kind, checked above
        if type_ is bool and not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}.")
        if type_ is not bool and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                       or value < 1):
            raise ValueError(f"{name} must be a positive whole number of tokens, or none for the whole split, "
                             f"got {value!r}.")
    model_config(settings, 2)
    train_config(settings)
    if settings.get("lr") == 0:
        raise ValueError("lr=0 never changes the weights, so the run would only score the weights it started from: "
                         "give a rate > 0, e.g. --set lr=1.")


def _split(settings: dict, group: str) -> dict:
    names = field_names(settings.get("kind", "rnnlm"))
    return {k: v for k, v in settings.items() if names.get(k) == group}


def model_config(settings: dict, vocab_size: int):
    """The model config of resolved ``settings`` (the config class registered for their ``kind``: an
    :class:`LMConfig` for ``rnnlm``) for a vocabulary of ``vocab_size`` words."""
    return model_config_class(settings.get("kind", "rnnlm"))(vocab_size=vocab_size, **_split(settings, "model"))


def train_config(settings: dict, **where) -> TrainConfig:
    """The :class:`TrainConfig` of resolved ``settings`` (``where``: ``out_dir``, ``progress``, ...).

    With ``loss_sum_over_time`` the paper's rate and clip are converted for the trainer's per-token
    mean loss: ``lr * bptt`` and ``clip / bptt`` (see the module docstring).
    """
    values = _split(settings, "train")
    numbers = all(isinstance(values.get(k), (int, float)) and not isinstance(values.get(k), bool)
                  for k in ("lr", "clip", "bptt"))
    if settings.get("loss_sum_over_time") and numbers and values["bptt"]:
        TrainConfig(**values, **where)  # a value out of range is named as it was given, not as converted
        values["lr"] = values["lr"] * values["bptt"]
        values["clip"] = values["clip"] / values["bptt"]
    return TrainConfig(**values, **where)


def recipe(settings: dict) -> dict:
    """The recipe fields of resolved ``settings``."""
    return _split(settings, "recipe")


# ------------------------------------------------------------------------------- describing

def published_rows(preset: Preset) -> list:
    """The :class:`~lmcourse.literature.Published` rows the preset reproduces."""
    return [published(dataset, model) for dataset, model in preset.published]


def describe(preset: Preset) -> str:
    """One line per preset for ``--help``: name, summary, and its published perplexities."""
    numbers = "; ".join(f"{row.model}: {'test ' if row.valid is None else f'valid {row.valid:g}, test '}"
                        f"{row.test:g} ({row.citation})" for row in published_rows(preset))
    after = f" Continues a trained `{preset.finetune_of}` run." if preset.finetune_of else ""
    label = "Not a paper's recipe; for comparison" if preset.own else "Published"
    return f"{preset.name}: {preset.summary}.{after} {label}: {numbers}."
