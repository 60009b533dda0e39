r"""The course model: one corpus, one set of sizes and one schedule, trained to convergence, that lessons
02b (its first rung, "LSTM"), 03, 04, 07, 08, 09 and 10 share and ablate.

The regime (measured in ``benchmarks/bench_ladder.py``, figures in ``benchmarks/README.md``) is chosen so
that each idea of the course has the problem it solves:

- **overfitting** (dropouts and tying pay): a few tens of thousands of training tokens, 40 epochs;
- **a plateau** (NT-ASGD's average pays): SGD at a constant rate, which stalls on validation text
  (the rate rises over the first ``warmup`` batches, so that the head's product of small matrices
  does not blow up on its first steps);
- **a head of small rank** (MoS pays): every rung's head has dimension :math:`d` (``head_size``), and
  the key-value lookups of the corpus need a log-probability matrix of rank ``n_keys`` > :math:`d + 1`;
  the output word vectors are E = ``emb_size`` wide, tied or not, and the head reads them through a
  learned map :math:`U` (E, d), so that tying shares E numbers per word while the softmax keeps rank :math:`d`;
- **recurring rare words** (the cache pays): names drawn per document, with a small CRP concentration,
  so that a document repeats its own names;
- **drift** (dynamic evaluation pays): documents with strong topics.

The trained models are the rungs of lesson 09's ladder (:data:`TRAINED`), each the one before plus one
idea. A rung is one dict of settings (:func:`rung_settings`) in the course's one vocabulary
(:mod:`lmcourse.training.settings`): the config classes' field names (``emb_size``, ``hidden_size``,
``batch_size``, ``n_experts``, ...), the corpus variant as its ``Params`` fields, and the course's own knobs
(``d``, ``dropout_scale``, ``rung``, and the rung's additions under ``model`` and ``train``), which
:func:`rung_fields` reads as the one adapter's flat settings (:data:`RUNG`). A lesson that
ablates the model (03) changes a rung's ``model`` or ``train`` dict and trains it with :func:`train_rung`
under its own run name; a lesson that reads it (02b) or wraps it (07, 08, 09, 10) loads it with :func:`course_model`.
Every rung is stored as the reference run ``course-model`` (``make runs LESSONS=09``).
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Callable, Optional

import torch

from ... import config
from ...config import by_scale, seed_everything
from ...corpora import embedded
from ...corpora.data import load_corpus
from ...corpora.grammar import Params
from ...store.stored_runs import CachedRun, train_or_load
from ...training.callbacks import LivePlot
from ...training.settings import Adapter
from ...training.trainer import Trainer, TrainConfig

__all__ = ["RUNS", "LESSON", "NAME", "SEEDS", "TRAINED", "AWD_PTB_DROPOUTS", "AWD_TRAINING", "VARIANT", "RUNG_ONLY",
           "ladder_params", "ladder_corpus", "shared_settings", "rung_settings", "rung_fields", "RUNG", "rung_configs",
           "model_config",
           "train_config", "fit_on_one_thread", "train_rung", "averaging_epoch", "course_model", "regime", "CACHE_GRID"]

LESSON = "09"  # ``make runs LESSONS=09`` regenerates the course model
NAME = "course-model"  # the stored run's name

SEEDS = (0, 1, 2)
AWD_PTB_DROPOUTS = dict(dropout=0.4, dropouth=0.25, dropouti=0.4, dropoute=0.1, wdrop=0.5)  # Merity et al. 2018
AWD_TRAINING = dict(optimizer="ntasgd", variable_bptt=True, alpha=2.0, beta=1.0, weight_decay=1.2e-6)  # the same
TRAINED = ("LSTM", "+ dropouts", "+ tying", "AWD recipe", "MoS")

# The neural cache's grid over the course model (lesson 07 tunes the AWD rung on it; lesson 09's MoS rung too):
# theta on a half-decade log scale, the mixing weight lambda, and the window (about one document at cpu, where
# the mean document is about 435 tokens). The model's states h_t are small (norm about 0.2 at cpu), so the
# scores theta h_t . h_i need a theta in the hundreds; at cpu every seed's best (theta, lambda) lies inside the
# grid, for the AWD rung (theta 300, lambda 0.1) and for MoS (theta 30, lambda 0.1), as lesson 07 asserts.
CACHE_GRID = dict(thetas=[3.0, 10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0, 10000.0],
                  lams=[0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3], window=500)

# The corpus variant's knobs (the rest are the embedded corpus's defaults); see the module docstring.
VARIANT = dict(n_nouns=100, n_verbs=40, n_adjs=60, n_advs=20, n_names=1000, name_alpha=0.3, n_keys=50,
               n_values=50, lookup_rate=0.8, topic_boost=30.0, off_topic=0.02, doc_sentences=40.0, phrase_rate=0.0)
# Shared settings that only their rung reads (MoS, the AWD recipe): they reach its configs through its own
# ``model`` and ``train`` additions, so that a rung before them keeps the configs' defaults.
RUNG_ONLY = ("n_experts", "dropoutl", "mos_latent", "nonmono")


def ladder_params(scale: str, **changes) -> Params:
    """The corpus variant of the ladder at ``scale`` (:class:`lmcourse.corpora.grammar.Params`)."""
    train, valid, test = by_scale(ci=(4_000, 1_000, 1_000), cpu=(40_000, 10_000, 10_000), gpu=(200_000, 20_000, 20_000),
                                  scale=scale)
    return Params(**{**VARIANT, "train_tokens": train, "valid_tokens": valid, "test_tokens": test, **changes})


def ladder_corpus(params: Params):
    """The ladder's corpus for ``params`` (generated into the cache folder on first use, in seconds)."""
    return load_corpus(embedded.ensure(params=params))


def shared_settings(scale: str, **changes) -> dict:
    """What all rungs share at ``scale``, named as the config classes name them: sizes (``emb_size``, the word
    vectors' width, input and output, tied or not; ``hidden_size``), training (``warmup``: batches over which
    the rate rises), the mixture's ``n_experts``, ``dropoutl`` and ``mos_latent`` and the AWD recipe's
    ``nonmono`` (read by their rungs only: :data:`RUNG_ONLY`); the lesson's own ``d`` (the head's dimension)
    and ``dropout_scale``; and the corpus variant (its ``Params`` fields, as a dict)."""
    common = dict(lr=8.0, bptt=35, clip=0.25, dropout_scale=0.5, mos_latent="tanh")
    shared = by_scale(ci=dict(common, emb_size=8, hidden_size=16, d=4, epochs=2, warmup=10, batch_size=10, nonmono=1,
                              n_experts=2, dropoutl=0.1),
                      cpu=dict(common, emb_size=64, hidden_size=64, d=16, epochs=40, warmup=100, batch_size=10,
                               nonmono=2, n_experts=10, dropoutl=0.145),
                      gpu=dict(common, emb_size=128, hidden_size=256, d=32, epochs=40, warmup=100, batch_size=20,
                               nonmono=3, n_experts=5, dropoutl=0.145),
                      scale=scale)
    corpus_changes = {k: v for k, v in changes.items() if k in Params.__dataclass_fields__}
    shared.update({k: v for k, v in changes.items() if k not in corpus_changes})
    shared["corpus"] = asdict(ladder_params(scale, **corpus_changes))
    return shared


def rung_settings(rung: str, seed: int, shared: dict) -> dict:
    """The full settings of one trained rung: each rung is the one before plus its idea."""
    drop = {k: round(p * shared["dropout_scale"], 6) for k, p in AWD_PTB_DROPOUTS.items()}
    model = dict(tie=False)
    train: dict = {}
    if rung != "LSTM":
        model.update(drop)
    if rung in ("+ tying", "AWD recipe", "MoS"):
        model["tie"] = True
    if rung in ("AWD recipe", "MoS"):
        train = dict(AWD_TRAINING, nonmono=shared["nonmono"])
    if rung == "MoS":
        model.update(head="mos", **{k: shared[k] for k in ("n_experts", "dropoutl", "mos_latent")})
    if rung not in TRAINED:
        raise ValueError(f"{rung!r} is not a trained rung of the ladder: pick one of {', '.join(TRAINED)}.")
    return dict(shared, rung=rung, model=model, train=train, seed=seed)


def rung_fields(settings: dict) -> dict:
    """The rung's settings as the one adapter reads them (:mod:`lmcourse.training.settings`, a recurrent LM): the
    shared fields every rung reads, the sizes :math:`d` decides, then the rung's ``model`` and ``train`` additions.
    ``num_layers`` LSTM layers (1 unless the settings say) of ``hidden_size`` units, the last one of ``d`` units
    (the head's dimension; with one layer, a linear map to ``d`` when ``d`` differs from ``hidden_size``); SGD's
    rate is kept (``lr_decay`` 1)."""
    s = {k: v for k, v in settings.items() if k not in RUNG_ONLY}
    if s.get("num_layers", 1) > 1:
        sizes = dict(last_size=s["d"])
    else:
        sizes = dict(num_layers=1, head_size=None if s["d"] == s["hidden_size"] else s["d"])
    if s["d"] != s["emb_size"] and not s["model"].get("tie"):  # untied output vectors as wide as the tied ones
        sizes["vector_size"] = s["emb_size"]
    return {**s, **sizes, **s["model"], "lr_decay": 1.0, **s["train"]}


RUNG = Adapter(rung_fields)  # a rung's network, its training, both, or a fresh model of it
rung_configs, model_config, train_config = RUNG.configs, RUNG.model_config, RUNG.train_config


def fit_on_one_thread(build: Callable[[], torch.nn.Module], settings: dict, corpus, config: TrainConfig,
                      floor: Optional[float] = None, plot: bool = True) -> tuple:
    """``(model, history)``: ``build()`` made from ``settings["seed"]`` and trained on one thread, so that the
    summation order, hence the run, is the same whatever the machine's cores (lessons 09 and 10 alike)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seed_everything(settings["seed"])
        lm = build()
        lm.vocab = corpus.vocab
        callbacks = [LivePlot(floor=floor, title=f"{settings['rung']}, seed {settings['seed']}")] if plot else []
        return lm, Trainer(lm, corpus.train, corpus.valid, config, callbacks=callbacks).fit()
    finally:
        torch.set_num_threads(threads)


def train_rung(settings: dict, corpus, floor: Optional[float] = None, retrain: Optional[bool] = None,
               plot: bool = True, progress: Optional[bool] = None, store: bool = True, scale: Optional[str] = None,
               dataset=None, name: str = NAME, lesson: Optional[str] = LESSON, build: Optional[Callable] = None):
    """Train one rung (or load it: the committed reference run, then the user's cache); a CachedRun.

    ``scale`` and ``dataset`` (default: the current ones) go into the stored run's key. A lesson that trains a
    branch of the course model stores it under its own ``name`` and ``lesson``; ``build(settings, vocab_size)``
    makes its network (default: the rung's, :data:`RUNG`)."""
    make = build or RUNG.build

    def fit():
        return fit_on_one_thread(lambda: make(settings, len(corpus.vocab)), settings, corpus,
                                 train_config(settings, progress=progress, live_plot=plot), floor, plot)

    if not store:  # the benchmark's path: train, keep nothing
        model, history = fit()
        return CachedRun(model, list(getattr(history, "rows", history)), False, None)
    run = train_or_load(name, settings, fit, corpus.vocab, retrain=retrain, scale=scale or config.SCALE,
                        dataset=config.DATASET if dataset is None else dataset, lesson=lesson)
    run.model.vocab = corpus.vocab
    return run


def averaging_epoch(history) -> Optional[int]:
    """The first epoch trained with averaged SGD (NT-ASGD fired at the end of the epoch before), or None."""
    return next((row["epoch"] for row in history if row.get("optimizer") == "asgd"), None)


def course_model(rung: str = "AWD recipe", seed: int = 0, scale: Optional[str] = None, retrain: Optional[bool] = None,
                 plot: bool = False, progress: Optional[bool] = None, **changes) -> tuple:
    """``(run, corpus)``: the course model's ``rung`` for ``seed`` at ``scale`` (default: the current one),
    loaded from the committed reference run (or trained, about 4 minutes on one core at ``cpu``), and its corpus.
    ``changes``: shared settings or corpus fields changed from the course's (:func:`shared_settings`)."""
    scale = scale or config.SCALE
    shared = shared_settings(scale, **changes)
    corpus = ladder_corpus(Params(**shared["corpus"]))
    run = train_rung(rung_settings(rung, seed, shared), corpus, retrain=retrain, plot=plot, progress=progress,
                     scale=scale, dataset=config.EMBEDDED)  # its corpus whatever LMCOURSE_DATASET says: no retraining
    return run, corpus


def regime(shared: dict, corpus=None) -> str:
    """What a row of the results table built on the course model was measured on, the one wording of it:
    ``"course model: 40,011 training tokens, 1 x 64, E = 64, d = 16, 40 epochs"``, that is the training tokens
    (of ``corpus`` when given, else the variant's nominal count), the LSTM's layers x units :math:`H`, the word
    vectors' width :math:`E`, the head's dimension :math:`d` and the epochs of ``shared``
    (:func:`shared_settings`, or a lesson's branch of it, such as lesson 03's wider LSTM), then any corpus
    field changed from :data:`VARIANT`'s (``n_names 300``)."""
    missing = [k for k in ("hidden_size", "emb_size", "d", "epochs", "corpus") if k not in shared]
    if missing:
        raise ValueError(f"regime() needs the course model's shared settings (shared_settings(scale)); "
                         f"these lack {', '.join(missing)}.")
    tokens = len(corpus.train) if corpus is not None else shared["corpus"]["train_tokens"]
    text = (f"course model: {tokens:,} training tokens, {shared.get('num_layers', 1)} x {shared['hidden_size']}, "
            f"E = {shared['emb_size']}, d = {shared['d']}, {shared['epochs']} epochs")
    usual = asdict(Params(**VARIANT))
    changed = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in shared["corpus"].items()
               if k in usual and not k.endswith("_tokens") and v != usual[k]]
    return text + (f"; corpus variant with {', '.join(changed)}" if changed else "")


def _trained_rungs(scale: str) -> list:
    """The trained rungs: five rungs times three seeds, each on the course's own variant of the embedded
    corpus (its ``Params`` fields in the settings' ``corpus``)."""
    shared = shared_settings(scale)
    return [rung_settings(rung, seed, shared) for rung in TRAINED for seed in SEEDS]


RUNS = {NAME: _trained_rungs}
