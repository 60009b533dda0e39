"""Lesson 02b's stored runs: the character LSTM on Tiny Shakespeare, three seeds, trained until validation stops
improving. Its word model is the course model's "LSTM" rung, stored with the course model (:mod:`.course_model`).

The character model is one LSTM layer of 512 units over 64-number character vectors, with locked dropout on its
output, trained with Adam on windows of 100 characters; the rate is divided by 4 when validation does not improve,
and the run ends at the first epoch that fails to improve after two such divisions. Samples drawn at several
points of training (``samples_at``, batches counted across epochs) are kept in the history, so that a stored run
shows the text becoming English. At ``cpu`` one epoch over the 1,003,856 training characters takes about
2.3 minutes on one core.
"""
from __future__ import annotations

from typing import Optional

import torch

from ...config import by_scale, seed_everything
from ...networks.generate import generate_text
from ...networks.models import RNNLM
from ...store.stored_runs import CachedRun, train_or_load
from ...training.callbacks import LivePlot, Snapshots
from ...training.settings import configs
from ...training.trainer import Trainer

NAME = "02b-char-lstm"
SEEDS = (0, 1, 2)


def _char_lstm(scale: str) -> list:
    """The character runs at ``scale``, one per seed (settings: the config classes' field names,
    :mod:`lmcourse.training.settings`, plus the lesson's own: the corpus, how many characters, what is watched)."""
    common = dict(optimizer="adam", clip=0.25, lr_decay=4.0, temperature=0.8)
    shared = by_scale(
        ci=dict(common, corpus="embedded", chars=40_000, eval_chars=4_000, emb_size=16, hidden_size=32, num_layers=1,
                dropout=0.0, lr=3e-3, epochs=1, max_decays=1, batch_size=16, bptt=50, watch=8, samples_at=[4, 8],
                sample_len=60),
        cpu=dict(common, corpus="tinyshakespeare", chars=None, eval_chars=None, emb_size=64, hidden_size=512,
                 num_layers=1, dropout=0.2, lr=2e-3, epochs=40, max_decays=2, batch_size=32, bptt=100, watch=100,
                 samples_at=[25, 100, 313, 1000, 3000], sample_len=300),
        gpu=dict(common, corpus="tinyshakespeare", chars=None, eval_chars=None, emb_size=128, hidden_size=512,
                 num_layers=2, dropout=0.25, dropouth=0.25, lr=2e-3, epochs=60, max_decays=2, batch_size=64, bptt=150,
                 watch=200, samples_at=[25, 100, 150, 500, 1500], sample_len=500),
        scale=scale)
    return [dict(shared, seed=seed) for seed in SEEDS]


def prompt(corpus_name: str) -> str:
    """What a sample starts from: a speaker's name in Shakespeare, a common word elsewhere."""
    return "ROMEO:\n" if corpus_name == "tinyshakespeare" else "the "


def splits(chars, settings: dict) -> tuple:
    """``(train, valid, test)`` character streams the run reads (``chars``/``eval_chars``: None for all)."""
    n, m = settings["chars"], settings["eval_chars"]
    return (chars.train if n is None else chars.train[:n], chars.valid if m is None else chars.valid[:m],
            chars.test if m is None else chars.test[:m])


def fresh(settings: dict, chars) -> RNNLM:
    """The character LSTM as its seed initialises it, before any training."""
    seed_everything(settings["seed"])
    model = RNNLM(configs(settings, len(chars.vocab))[0])
    model.vocab = chars.vocab
    return model


def train(settings: dict, chars, scale: str, retrain: Optional[bool] = None, plot: bool = True,
          progress: Optional[bool] = None, out_dir: Optional[str] = None) -> CachedRun:
    """The character run of ``settings`` on ``chars`` (a character-level corpus), loaded when stored, else trained on
    one thread (one seed, one run, whatever the machine's cores), with samples at ``settings["samples_at"]``."""
    train_chars, valid_chars, _ = splits(chars, settings)
    start = prompt(chars.name)

    def sample_now(model):
        return generate_text(model, start, max_tokens=settings["sample_len"], temperature=settings["temperature"],
                             seed=0)

    def fit():
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            model = fresh(settings, chars)
            train_config = configs(settings, len(chars.vocab), progress=progress, live_plot=plot, out_dir=out_dir)[1]
            live = LivePlot(valid=valid_chars[:20_000], every=settings["watch"], enabled=plot,
                            title=f"character LSTM on {chars.name}, seed {settings['seed']}")
            watch = Snapshots(at=settings["samples_at"], sample=sample_now, plot=live)
            trainer = Trainer(model, train_chars, valid_chars, train_config, callbacks=[live, watch])
            return model, trainer.fit(resume="auto" if out_dir else False)
        finally:
            torch.set_num_threads(threads)

    run = train_or_load(NAME, settings, fit, chars.vocab, scale=scale, dataset=settings["corpus"], retrain=retrain,
                        lesson="02b")
    run.model.vocab = chars.vocab
    return run


BITS = "02b-char-bits"  # each seed's bits per character on all of validation and test, stored as numbers
CHECK_CHARS = 1_000  # the first test characters, scored again live by the lesson against the stored number


def _bits(scale: str) -> list:
    return [dict(s, check_chars=CHECK_CHARS) for s in _char_lstm(scale)]


RUNS = {NAME: _char_lstm, BITS: _bits}
LEVELS = {NAME: "char", BITS: "char"}  # their corpus fingerprint is checked at the character level
