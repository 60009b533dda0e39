r"""Trained models whose head's rank is what limits them: the runs of lessons 05 and 06.

A softmax head of dimension :math:`d` gives log-probability matrices of rank at most :math:`d + 2`
(Yang et al. 2018, Section 2), but a model trained for a few minutes is usually limited by its
training long before its rank. These runs are set up so that the rank binds:

- **the data**: the embedded corpus with its lookups turned up (:func:`lookup_rich`): almost every
  verb's object is a key followed by a value drawn from the key's row of a 100 x 100 table of full
  rank, the fixed expressions are off and the open word classes are small, so about one token in
  ten is a lookup and the vocabulary has about a thousand words;
- **the model** (:func:`model_config`): a wide LSTM whose last layer's output is mapped linearly to
  :math:`d` numbers (``LMConfig.head_size``), so that the network before the head can be as good
  as it likes; a softmax (``n_experts = 1``) or a mixture of ``n_experts`` softmaxes of the same
  :math:`d` with linear latent contexts; word vectors started at a scale (``init_range``) at which a
  small :math:`d` still spreads the first logits;
- **the training** (:func:`train_config`): Adam, three epochs, the last at a quarter of the rate,
  clipped gradients.

:func:`train` trains one such model through :func:`~lmcourse.store.stored_runs.train_or_load`
(stored in the user's cache after the first run; lesson 06's six, declared in
:mod:`lmcourse.course.runs.lesson06`, are also committed in ``reference_runs/``), on one CPU thread: these
models are small, and one thread is as fast as two on an idle 2-core machine and much faster on a busy one.
A run given the corpus variant's ``params`` is keyed by their fields (as the course model is), so that the
registry can rebuild its corpus and check a committed run against it. Its key names the embedded corpus
(:data:`DATASET`) whatever ``LMCOURSE_DATASET`` says: these runs read a variant of it and nothing else, so another
setting must not make them train the same thing again under another name.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, replace
from typing import Optional

import torch

from .. import config
from ..config import seed_everything
from ..corpora.grammar import Params
from ..store.stored_runs import CachedRun, train_or_load
from ..training import settings as adapter
from ..training.callbacks import LivePlot
from ..training.trainconfig import key_fields
from ..training.trainer import Trainer, TrainConfig

__all__ = ["DATASET", "LOOKUP_RICH", "lookup_rich", "model_config", "train_config", "run_settings", "train"]

# The corpus these runs read (a variant of it), and so the dataset in their keys, whatever LMCOURSE_DATASET says.
DATASET = config.EMBEDDED

# The corpus's knobs that make lookups frequent and the rest of the language small.
LOOKUP_RICH = dict(lookup_rate=0.95, phrase_rate=0.0, n_keys=100, n_values=100,
                   n_nouns=100, n_verbs=40, n_adjs=60, n_advs=20, n_names=20)


def lookup_rich(train_tokens: int, eval_tokens: int, **changes) -> Params:
    """The lookup-rich variant of the embedded corpus: :data:`LOOKUP_RICH`, the split sizes, and ``changes``."""
    return Params(**{**LOOKUP_RICH, "train_tokens": train_tokens, "valid_tokens": eval_tokens,
                     "test_tokens": eval_tokens, **changes})


def model_config(vocab_size: int, d: int, n_experts: int = 1, emb_size: int = 32, hidden_size: int = 128,
                 num_layers: int = 1, init_range: float = 1.0, latent: str = "linear"):
    """A wide LSTM and a head of dimension ``d``: a softmax (``n_experts = 1``) or a mixture of softmaxes
    whose latent contexts are ``latent`` (``linear``, or the paper's ``tanh``); through the one adapter."""
    sizes = dict(kind="rnnlm", emb_size=emb_size, hidden_size=hidden_size, num_layers=num_layers,
                 last_size=hidden_size, head_size=d, init_range=init_range)
    mixture = {} if n_experts == 1 else dict(head="mos", n_experts=n_experts, mos_latent=latent)
    return adapter.model_config({**sizes, **mixture}, vocab_size)


def train_config(epochs: int = 3, seed: int = 0, lr: float = 2e-2, batch_size: int = 32, bptt: int = 35,
                 **changes) -> TrainConfig:
    """Adam at ``lr``, divided by 4 for the last epoch; gradients clipped at 0.25; through the one adapter."""
    return adapter.train_config(dict(epochs=epochs, batch_size=batch_size, bptt=bptt, lr=lr, clip=0.25,
                                     optimizer="adam", lr_decay=4.0, decay_after=max(1, epochs - 1), seed=seed),
                                **changes)


@contextmanager
def _threads(n: Optional[int]):
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_settings(corpus, model, training: TrainConfig, valid_tokens: Optional[int] = None,
                 params: Optional[Params] = None) -> dict:
    """What decides a run's result, the key it is stored under: the model, the training (how it is shown
    aside), the validation slice and the corpus: the fields of its variant's ``params`` when given, else its
    name (which carries the hash of its parameters)."""
    return dict(model=model.as_dict(), train=key_fields(training),
                valid_tokens=valid_tokens, corpus=corpus.name if params is None else asdict(params),
                train_tokens=len(corpus.train))


def train(name: str, corpus, model, training: TrainConfig, valid_tokens: Optional[int] = None,
          floor: Optional[float] = None, title: Optional[str] = None, retrain: Optional[bool] = None,
          threads: Optional[int] = 1, plot: bool = True, scale: Optional[str] = None, dataset=None,
          params: Optional[Params] = None, lesson: Optional[str] = None) -> CachedRun:
    """Train ``model`` with ``training`` on ``corpus`` (or load the stored run), scoring the first
    ``valid_tokens`` of validation text after each epoch; the live curve (``plot``) carries ``floor``.
    ``scale`` (default: the current one) and ``dataset`` (default: :data:`DATASET`, the embedded corpus these runs
    read, never ``LMCOURSE_DATASET``'s) go into the stored run's key, and ``params`` (the corpus variant,
    :func:`lookup_rich`) when given. A run given a ``lesson`` is one of that lesson's
    reference runs (``make runs`` writes it into ``reference_runs/``); without one it stays in the user's cache."""
    valid = corpus.valid if valid_tokens is None else corpus.valid[:valid_tokens]
    settings = run_settings(corpus, model, training, valid_tokens, params)
    if not plot:
        training = replace(training, live_plot=False)

    def fit():
        seed_everything(training.seed)
        lm = adapter.build(model.as_dict(), model.vocab_size)
        lm.vocab = corpus.vocab
        callbacks = [LivePlot(floor=floor, title=title or name)] if plot else []
        with _threads(threads):
            history = Trainer(lm, corpus.train, valid, training, callbacks=callbacks).fit()
        return lm, history

    run = train_or_load(name, settings, fit, corpus.vocab, retrain=retrain, reference_run=lesson is not None,
                        lesson=lesson, scale=scale or config.SCALE,
                        dataset=DATASET if dataset is None else dataset)
    run.model.vocab = corpus.vocab
    return run
