"""Many runs in one live figure (training.compare), the training-text probe and the epoch snapshots (training.callbacks),
and the one way to write a value per scale (config.by_scale)."""
import math

import pytest
import torch

from lmcourse import config
from lmcourse.networks.loss import evaluate
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.training.callbacks import LivePlot, Snapshots, TrainProbe
from lmcourse.training.compare import LiveCompare
from lmcourse.training.trainer import Trainer, TrainConfig

V = 12


def _stream(n=600, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (n,), generator=g)


def _model(dropout=0.0):
    torch.manual_seed(0)
    return RNNLM(LMConfig(vocab_size=V, emb_size=8, hidden_size=8, num_layers=1, dropout=dropout, dropouti=dropout))


class Count:
    def __init__(self):
        self.n = 0

    def update(self, k):
        self.n += k


def _fit(model, callbacks, epochs=2):
    cfg = TrainConfig(epochs=epochs, batch_size=4, bptt=10, lr=1.0, seed=0, progress=False, live_plot=False)
    return Trainer(model, _stream(), _stream(200, 1), cfg, callbacks=callbacks).fit()


def test_live_compare_collects_every_run_and_advances_the_bar():
    live, bar = LiveCompare(series={"valid_ppl": ("o-", "validation"), "train_ppl": (":", "training")},
                            enabled=False), Count()
    history = _fit(_model(), [live.callback(("a", 0), bar)])
    live.replay(("a", 1), history.rows, bar)
    assert bar.n == 4 and live.curves[("a", 0)]["valid_ppl"] == [r["valid_ppl"] for r in history.rows]
    assert live.curves[("a", 1)] == live.curves[("a", 0)]
    ax = live.figure().axes[0]
    assert len(ax.lines) == 4 and [t.get_text() for t in ax.get_legend().get_texts()] == ["a, validation", "a, training"]
    live.draw()  # not in a notebook, and disabled: records only, shows nothing
    assert live.handle is None


def test_the_probe_measures_training_text_with_and_without_dropout_and_leaves_the_rng_alone():
    from lmcourse.corpora.data import batchify
    from lmcourse.training.callbacks import Callback

    probe_tokens = _stream(300, 2)

    class Check(Callback):  # the same text scored by evaluate at the same moment, after the probe
        def on_epoch_end(self, trainer, row):
            row["check"] = math.exp(evaluate(trainer.model, batchify(probe_tokens, 10), 10))

    history = _fit(_model(dropout=0.5), [TrainProbe(probe_tokens), Check()], epochs=1)
    row = history.rows[-1]
    assert row["train_on_ppl"] > row["train_off_ppl"] > 1.0  # dropout on costs perplexity on the same text
    assert math.isclose(row["train_off_ppl"], row["check"], rel_tol=1e-12)
    # the probe puts the random state back: training with it and without it gives the same weights
    with_probe, without = _model(dropout=0.5), _model(dropout=0.5)
    _fit(with_probe, [TrainProbe(probe_tokens)], epochs=1)
    _fit(without, [], epochs=1)
    assert all(torch.equal(a, b) for a, b in zip(with_probe.state_dict().values(), without.state_dict().values()))


def test_snapshots_keep_samples_batches_and_the_curve_in_the_history():
    plot = LivePlot(valid=_stream(100, 3), every=5, enabled=False)
    snaps = Snapshots(at=(3, 7), sample=lambda m: "text", plot=plot)
    history = _fit(_model(), [plot, snaps], epochs=1)
    row = history.rows[0]
    assert row["samples"] == [[3, "text"], [7, "text"]] and row["batches"] == snaps.step > 7
    assert row["curve"] and all(0 < p[0] <= 1 for p in row["curve"])


def test_by_scale_picks_the_given_scale_or_the_current_one(monkeypatch):
    assert [config.by_scale(ci=1, cpu=2, gpu=3, scale=s) for s in config.SCALES] == [1, 2, 3]
    monkeypatch.setattr(config, "SCALE", "gpu")
    assert config.by_scale(ci=1, cpu=2, gpu=3) == 3
    with pytest.raises(ValueError, match="is not a scale"):
        config.by_scale(ci=1, cpu=2, gpu=3, scale="huge")


def test_the_samples_are_in_the_checkpoint_of_their_own_epoch(tmp_path):
    # a run killed right after an epoch's save resumes from that checkpoint: its row must already hold the samples
    plot = LivePlot(valid=_stream(100, 3), every=5, enabled=False)
    snaps = Snapshots(at=(3,), sample=lambda m: "text", plot=plot)
    cfg = TrainConfig(epochs=1, batch_size=4, bptt=10, lr=1.0, seed=0, progress=False, live_plot=False,
                      out_dir=str(tmp_path))
    Trainer(_model(), _stream(), _stream(200, 1), cfg, callbacks=[plot, snaps]).fit()
    saved = torch.load(tmp_path / "last.pt", map_location="cpu", weights_only=False)  # what a resume reads
    assert saved["history"]["rows"][0]["samples"] == [[3, "text"]]
