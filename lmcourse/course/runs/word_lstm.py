"""The word LSTM of pytorch/examples' recipe: declared once here, and trained by :func:`train` alone.

The recipe is pytorch/examples 2017's (SGD at rate 20, divided by 4 when validation stalls, gradients
clipped at 0.25, 20 columns, windows of 35), and at ``gpu`` its medium tied model (pytorch/examples 2017,
README). After each epoch it is scored on the whole validation split.

Lesson 02b's word model is now the course model (:mod:`.course_model`), so no lesson declares this run
and none of it is committed in ``reference_runs/``: :func:`train` stores it in the user's cache only
(``reference_run=False``), trained the first time it is asked for. The command line
(``python -m lmcourse word-lstm``) alone reaches it, through :func:`train` (lessons 07 and 08 moved to the
course model). Its recipe is one at every scale: standard dropout at one rate (:func:`model_config`).
``word-lstm`` (``word-lstm-gpu`` at ``gpu``) keeps the name it had before lessons named their runs.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ... import config
from ...config import by_scale, seed_everything
from ...store.stored_runs import CachedRun, train_or_load
from ...training.callbacks import Callback, KeepCurve, LivePlot
from ...training.settings import Adapter
from ...training.trainer import Trainer

def word_lstm(scale: Optional[str] = None) -> tuple[str, dict]:
    """``(name, settings)`` of the word LSTM at ``scale`` (default: the current one)."""
    small = dict(emb_size=200, hidden_size=200, num_layers=1, tie=True, dropout=0.0, epochs=1, lr=20.0, batch_size=20,
                 bptt=35, clip=0.25, seed=1111)
    medium = dict(small, emb_size=650, hidden_size=650, num_layers=2, dropout=0.5, epochs=40)
    return by_scale(ci=("word-lstm", dict(small, train_tokens=20_000)), cpu=("word-lstm", dict(small, train_tokens=None)),
                    gpu=("word-lstm-gpu", dict(medium, train_tokens=None)), scale=scale)


def word_fields(settings: dict) -> dict:
    """The settings as the one adapter reads them (:mod:`lmcourse.training.settings`, a recurrent LM): standard
    dropout at one rate on the embeddings, between layers and at the output."""
    d = settings["dropout"]
    return dict(settings, kind="rnnlm", dropouth=d, dropouti=d, dropout_kind="standard")


WORD = Adapter(word_fields)  # the network of settings, its training, or a fresh model of it
model_config, train_config = WORD.model_config, WORD.train_config


def fresh(settings: dict, vocab):
    """The word LSTM as its seed initialises it, before any training."""
    seed_everything(settings["seed"])
    model = WORD.build(settings, len(vocab))
    model.vocab = vocab
    return model


def train(corpus, scale: str, dataset=None, plot: Optional[LivePlot] = None,
          callbacks: Sequence[Callback] = (), retrain: Optional[bool] = None, **shown) -> CachedRun:
    """The word LSTM of ``scale`` on ``corpus``: loaded from the user's cache when stored, else trained and stored
    there (never in ``reference_runs/``).

    ``plot`` (a :class:`LivePlot`) draws the training live and keeps its within-epoch points in the history
    (``row["curve"]``); ``dataset`` is the corpus's name in the run's key (default: the current dataset)."""
    dataset = config.DATASET if dataset is None else dataset
    name, settings = word_lstm(scale)

    def fit():
        model = fresh(settings, corpus.vocab)
        n = settings["train_tokens"]
        tokens = corpus.train if n is None else corpus.train[:n]
        hooks = list(callbacks) + ([plot, KeepCurve(plot)] if plot is not None else [])
        return model, Trainer(model, tokens, corpus.valid, train_config(settings, **shown), callbacks=hooks).fit()

    run = train_or_load(name, settings, fit, corpus.vocab, scale=scale, dataset=dataset, retrain=retrain,
                        reference_run=False)
    run.model.vocab = corpus.vocab
    return run

