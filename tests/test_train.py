"""The trainer: learning, determinism, divergence, interruption, NT-ASGD, variable BPTT, AR/TAR,
gradient accumulation, heads returning log-probabilities, unwritable paths and failures inside fit."""
import json
import math
import re

import pytest
import torch
import torch.nn.functional as F

from lmcourse import progress
from lmcourse.config import seed_everything
from lmcourse.corpora.data import batchify
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.training.callbacks import Callback, LivePlot, ProgressBar
from lmcourse.training.checkpoint import load_checkpoint
from lmcourse.training.trainer import (
    History,
    TrainConfig,
    Trainer,
    averaged_weights,
    evaluate,
    scaled_lr,
    should_switch_to_asgd,
)
from lmcourse.vocab import Vocab

V = 12


def periodic(n, period=5, seed=0):
    """A stream that is a random cycle of ``period`` tokens, with one token in ten resampled."""
    g = torch.Generator().manual_seed(seed)
    cycle = torch.randperm(V, generator=g)[:period]
    x = cycle.repeat(n // period + 1)[:n].clone()
    noise = torch.rand(n, generator=g) < 0.1
    x[noise] = torch.randint(0, V, (int(noise.sum()),), generator=g)
    return x


TRAIN, VALID = periodic(2000), periodic(400, seed=0)


def model(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(vocab_size=V, emb_size=8, hidden_size=16, num_layers=2, tie=True)
    cfg.update(kw)
    m = RNNLM(LMConfig(**cfg))
    m.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return m


def config(**kw):
    cfg = dict(epochs=2, batch_size=10, eval_batch_size=5, bptt=10, lr=5.0, progress=False, live_plot=False)
    cfg.update(kw)
    return TrainConfig(**cfg)


def weights(m):
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def same_weights(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def valid_loss_now(trainer):
    return evaluate(trainer.model, trainer.valid_data, trainer.config.bptt)


class Perturb(Callback):
    """Add noise to the weights after the last batch of the given epochs, so their validation is worse."""

    def __init__(self, epochs, scale=1.0):
        self.epochs, self.scale = set(epochs), scale

    def on_batch_end(self, trainer, batch_idx, loss):
        if trainer.epoch in self.epochs and batch_idx == trainer.batches_per_epoch() - 1:
            with torch.no_grad():
                for p in trainer.model.parameters():
                    p.add_(self.scale * torch.randn_like(p))


# ------------------------------------------------------------------------------- learning

def test_training_reduces_loss_and_keeps_best():
    trainer = Trainer(model(), TRAIN, VALID, config(epochs=4, lr=20.0))
    history = trainer.fit()
    assert isinstance(history, History) and len(history) == 4 and history.stop_reason == "completed"
    first, last = history.rows[0], history.rows[-1]
    assert last["train_loss"] < first["train_loss"] - 0.5
    assert history.best["valid_ppl"] < 3.0  # a uniform guess scores V = 12; the cycle alone about 6
    assert history.best["valid_loss"] == min(history.column("valid_loss"))
    for row in history.rows:
        assert math.isclose(row["train_ppl"], math.exp(row["train_loss"]))
        assert row["tokens_per_s"] > 0 and row["optimizer"] == "sgd"
    assert set(history.as_dict()) >= {"epoch", "train_loss", "valid_ppl", "lr", "elapsed_s"}
    assert valid_loss_now(trainer) == pytest.approx(history.best["valid_loss"], abs=1e-12)


def test_same_seed_same_history():
    kw = dict(dropout=0.3, dropouth=0.2, dropouti=0.2, dropoute=0.1, wdrop=0.3)
    runs = []
    for _ in range(2):
        m = model(**kw)
        h = Trainer(m, TRAIN, VALID, config(variable_bptt=True, alpha=2.0, beta=1.0)).fit()
        runs.append((h, weights(m)))
    (h1, w1), (h2, w2) = runs
    for key in ("train_loss", "valid_loss", "lr", "ar", "tar"):
        assert h1.column(key) == h2.column(key)
    assert same_weights(w1, w2)
    m = model(**kw)
    h3 = Trainer(m, TRAIN, VALID, config(variable_bptt=True, alpha=2.0, beta=1.0, seed=7)).fit()
    assert h3.column("train_loss") != h1.column("train_loss")


def test_sgd_divides_lr_when_validation_worsens():
    history = Trainer(model(), TRAIN, VALID, config(epochs=3, lr=1.0), callbacks=[Perturb({2})]).fit()
    lrs, losses = history.column("lr"), history.column("valid_loss")
    assert losses[1] > losses[0]
    assert lrs == [1.0, 1.0, 0.25]


# ----------------------------------------------------------------------- stopping safely

class Poison(Callback):
    """Set every weight to NaN after the given batch of epoch 1, so the next loss is NaN."""

    def __init__(self, batch):
        self.batch = batch

    def on_batch_end(self, trainer, batch_idx, loss):
        if trainer.epoch == 1 and batch_idx == self.batch:
            with torch.no_grad():
                for p in trainer.model.parameters():
                    p.fill_(float("nan"))


def test_nan_loss_stops_with_a_clear_message(capsys):
    m = model()
    start = weights(m)
    with pytest.warns(RuntimeWarning, match=r"The training loss became nan at epoch 1, batch 3: "
                                            r"the learning rate \(lr=5\) is probably too high"):
        history = Trainer(m, TRAIN, VALID, config(), callbacks=[Poison(1)]).fit()
    assert "lower it (try 1.25) or clip gradients harder." in capsys.readouterr().out
    assert history.stop_reason == "nan" and history.rows == []
    assert same_weights(weights(m), start) and not m.training


@pytest.mark.parametrize("lr", [1e6, 1e36])
def test_a_huge_learning_rate_stops_instead_of_completing(lr, tmp_path, capsys):
    m = model()
    start = weights(m)
    path = tmp_path / "best.pt"
    with pytest.warns(RuntimeWarning, match=r"The training loss became \S+ at epoch 1, batch \d+(, far above the "
                                            r"2.48 nats of a uniform guess)?: the learning rate \(lr=1e\+(06|36)\)"):
        history = Trainer(m, TRAIN, VALID, config(lr=lr, clip=0, checkpoint=path)).fit()
    assert history.stop_reason in ("diverged", "nan") and history.rows == [] and history.best is None
    assert same_weights(weights(m), start)
    assert not path.exists()  # no "best" model worse than the start
    assert "lower it (try" in capsys.readouterr().out


def test_a_diverged_validation_stops_and_keeps_the_best_weights(tmp_path):
    class Spoil(Callback):  # after epoch 2's last batch, make every prediction confidently wrong
        def on_batch_end(self, trainer, batch_idx, loss):
            if trainer.epoch == 2 and batch_idx == trainer.batches_per_epoch() - 1:
                with torch.no_grad():
                    trainer.model.head.decoder.bias[0] = 1e4

    m = model()
    with pytest.warns(RuntimeWarning, match=r"The validation perplexity became inf at epoch 2: the learning rate"):
        history = Trainer(m, TRAIN, VALID, config(epochs=3, checkpoint=tmp_path / "best.pt"), callbacks=[Spoil()]).fit()
    assert history.stop_reason == "diverged" and len(history) == 2 and history.best["epoch"] == 1
    saved, info = load_checkpoint(tmp_path / "best.pt", map_location="cpu")
    assert info["extra"]["epoch"] == 1 and same_weights(weights(saved), weights(m))


class Forget(Callback):
    """Zero every weight after the last batch of the given epochs. The model then gives every token the
    same logit, so its validation loss is log V, the same on any CPU and thread count."""

    def __init__(self, epochs):
        self.epochs = set(epochs)

    def on_batch_end(self, trainer, batch_idx, loss):
        if trainer.epoch in self.epochs and batch_idx == trainer.batches_per_epoch() - 1:
            with torch.no_grad():
                for p in trainer.model.parameters():
                    p.zero_()


def unigram_model():
    """The test model predicting the add-one unigram frequencies q of VALID at every step: every weight
    zero (so every LSTM output is 0) but the output bias, log q. Its validation loss is the cross-entropy
    of VALID's frequencies p with q, which is far below log V because VALID is mostly a 5-token cycle."""
    m = model()
    counts = torch.bincount(VALID, minlength=V).double() + 1
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.head.decoder.bias.copy_((counts / counts.sum()).log())
    return m


def test_best_is_never_worse_than_the_start(tmp_path):
    """A model whose only epoch ends worse than its start (its weights forgotten) keeps its starting weights."""
    m = unigram_model()
    start = weights(m)
    history = Trainer(m, TRAIN, VALID, config(epochs=1, lr=1.0, checkpoint=tmp_path / "b.pt"),
                      callbacks=[Forget({1})]).fit()
    assert history.rows[0]["valid_loss"] == pytest.approx(math.log(V), abs=1e-5)
    assert history.start["valid_loss"] < math.log(V) - 0.2  # the precondition, by construction
    assert history.best is None and history.stop_reason == "completed"
    assert same_weights(weights(m), start) and not (tmp_path / "b.pt").exists()


class InterruptAt(Callback):
    def __init__(self, epoch, batch):
        self.at = (epoch, batch)

    def on_batch_end(self, trainer, batch_idx, loss):
        if (trainer.epoch, batch_idx) == self.at:
            raise KeyboardInterrupt


def test_interrupt_keeps_history_checkpoint_and_best_weights(tmp_path):
    path = tmp_path / "best.pt"
    m = model()
    trainer = Trainer(m, TRAIN, VALID, config(epochs=5, checkpoint=path), callbacks=[InterruptAt(3, 4)])
    history = trainer.fit()
    assert history.stop_reason == "interrupted" and len(history) == 2
    assert path.exists()
    saved, info = load_checkpoint(path, vocab=m.vocab, map_location="cpu")
    assert info["extra"]["epoch"] == history.best["epoch"]
    assert same_weights(weights(saved), weights(m))
    assert valid_loss_now(trainer) == pytest.approx(history.best["valid_loss"], abs=1e-12)
    assert [r["epoch"] for r in info["history"]] == list(range(1, history.best["epoch"] + 1))


def test_callback_can_stop_training():
    class StopAt(Callback):
        def on_batch_end(self, trainer, batch_idx, loss):
            trainer.stop = batch_idx == 3

    history = Trainer(model(), TRAIN, VALID, config(epochs=3), callbacks=[StopAt()]).fit()
    assert history.stop_reason == "callback" and len(history) == 1


def test_bad_configuration_is_explained():
    with pytest.raises(ValueError, match="optimizer='rmsprop' is unknown"):
        config(optimizer="rmsprop")
    with pytest.raises(ValueError, match="too few for batch_size=10"):
        Trainer(model(), TRAIN[:15], VALID, config())
    with pytest.raises(ValueError, match="outside the vocabulary"):
        Trainer(model(), TRAIN + V, VALID, config())


# --------------------------------------------------------------------------- NT-ASGD

def test_nt_asgd_trigger_rule():
    # the code's rule: compare with the best *before* the last n epochs (awd-lstm-lm issue #13)
    assert not should_switch_to_asgd([5.0, 4.0], 4.5, nonmono=2)  # too short a history
    assert not should_switch_to_asgd([5.0, 4.0, 3.0], 4.5, nonmono=2)  # 4.5 < min([5.0])
    assert should_switch_to_asgd([4.0, 5.0, 3.0], 4.5, nonmono=2)  # 4.5 > min([4.0])
    assert not should_switch_to_asgd([4.0, 3.0, 3.5], 3.9, nonmono=2)  # 3.9 < min([4.0])


def test_nt_asgd_switches_and_evaluates_averaged_weights():
    seen = {}

    class Spy(Callback):
        def on_epoch_end(self, trainer, row):
            if row["optimizer"] == "asgd" and "averaged" not in seen:
                raw = valid_loss_now(trainer)
                with averaged_weights(trainer.optimizer, trainer.params) as swapped:
                    assert swapped
                    seen["averaged"] = valid_loss_now(trainer)
                seen["raw"], seen["row"] = raw, row["valid_loss"]

    history = Trainer(model(), TRAIN, VALID, config(epochs=4, optimizer="ntasgd", nonmono=1, lr=0.5),
                      callbacks=[Perturb({3}), Spy()]).fit()
    # end of epoch 3: H = [v1, v2] is longer than n = 1 and v3 > min(H[:-1]) = v1
    assert history.column("optimizer") == ["sgd", "sgd", "sgd", "asgd"]
    assert history.column("averaged") == [False, False, False, True]
    assert history.column("lr") == [0.5] * 4  # NT-ASGD never decays the rate
    assert seen["row"] == seen["averaged"] != seen["raw"]


def test_asgd_ends_with_best_averaged_weights():
    m = model()
    trainer = Trainer(m, TRAIN, VALID, config(epochs=3, optimizer="asgd", lr=1.0))
    history = trainer.fit()
    assert all(history.column("averaged"))
    assert valid_loss_now(trainer) == pytest.approx(history.best["valid_loss"], abs=1e-12)


# ------------------------------------------------------------------------ variable BPTT

def test_scaled_lr_sets_the_step_size_exactly_for_sgd_and_asgd():
    for make in (lambda p: torch.optim.SGD([p], lr=0.1), lambda p: torch.optim.ASGD([p], lr=0.1, t0=0, lambd=0.0)):
        p = torch.zeros(3, requires_grad=True)
        opt = make(p)
        for factor, expected in ((0.5, -0.05), (1, -0.15), (2.0, -0.35), (1, -0.45)):
            p.grad = torch.ones(3)
            with scaled_lr(opt, factor):
                opt.step()
            assert opt.param_groups[0]["lr"] == 0.1
            torch.testing.assert_close(p.detach(), torch.full((3,), expected))


class StepSpy(Callback):
    """Records ``read(trainer, lr)`` at every optimizer step, with the rate the step uses."""

    def __init__(self, read):
        self.read, self.seen = read, []

    def on_train_begin(self, trainer):
        opt, step = trainer.optimizer, trainer.optimizer.step

        def spying_step(*args, **kwargs):
            self.seen.append(self.read(trainer, opt.param_groups[0]["lr"]))
            return step(*args, **kwargs)
        opt.step = spying_step


def test_variable_bptt_rescales_lr_during_each_step():
    spy = StepSpy(lambda trainer, lr: (lr, trainer.seq_len))
    seen = spy.seen
    trainer = Trainer(model(), TRAIN, VALID, config(epochs=1, lr=2.0, variable_bptt=True), callbacks=[spy])
    trainer.fit()
    assert len({s for _, s in seen}) > 2
    for lr, seq_len in seen:
        assert lr == pytest.approx(2.0 * seq_len / 10)
    assert trainer.lr == 2.0


def test_warmup_raises_the_rate_linearly_over_the_first_batches_of_the_first_epoch():
    spy = StepSpy(lambda trainer, lr: (trainer.epoch, lr))
    seen = spy.seen
    trainer = Trainer(model(), TRAIN, VALID, config(epochs=2, lr=2.0, warmup=4), callbacks=[spy])
    trainer.fit()
    first = [lr for epoch, lr in seen if epoch == 1]
    assert first[:5] == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.0])  # eta * i / warmup, then eta
    assert all(lr == 2.0 for epoch, lr in seen if epoch == 2) and trainer.lr == 2.0
    with pytest.raises(ValueError, match="warmup"):
        config(warmup=-1)


# ----------------------------------------------------------------------------- AR / TAR

def test_ar_tar_enter_the_gradient_not_the_reported_loss():
    kw = dict(dropout=0.4, dropouth=0.2)
    losses, finals = {}, {}
    for alpha, beta in ((0.0, 0.0), (2.0, 1.0)):
        class First(Callback):
            def on_batch_end(self, trainer, batch_idx, loss):
                losses.setdefault((alpha, beta), float(loss))
        m = model(**kw)
        h = Trainer(m, TRAIN, VALID, config(epochs=1, max_batches=1, alpha=alpha, beta=beta, lr=1.0, seed=3),
                    callbacks=[First()]).fit()
        finals[(alpha, beta)] = (weights(m), h)
    assert losses[(0.0, 0.0)] == losses[(2.0, 1.0)]
    (w0, h0), (w1, h1) = finals[(0.0, 0.0)], finals[(2.0, 1.0)]
    assert "ar" not in h0.rows[0] and h1.rows[0]["ar"] > 0 and h1.rows[0]["tar"] > 0
    assert not same_weights(w0, w1)

    # the same step by hand: cross-entropy + alpha*mean(dropped^2) + beta*mean(diff(raw)^2)
    m = model(**kw)
    seed_everything(3)
    source = batchify(TRAIN, 10)
    x, y = source[:10], source[1:11]
    out = m.train()(x)
    objective = (F.cross_entropy(out.logits.reshape(-1, V), y.reshape(-1))
                 + 2.0 * out.outputs[-1].pow(2).mean()
                 + 1.0 * (out.raw_outputs[-1][1:] - out.raw_outputs[-1][:-1]).pow(2).mean())
    objective.backward()
    torch.nn.utils.clip_grad_norm_(list(m.parameters()), 0.25)
    with torch.no_grad():
        for p in m.parameters():
            p -= 1.0 * p.grad
    for k, v in weights(m).items():
        torch.testing.assert_close(v, w1[k], rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------- live

def test_live_callbacks_stay_off_under_ci(monkeypatch):
    monkeypatch.setenv("CI", "1")
    assert not progress.progress_enabled(None) and not progress.live_plot_enabled(None)
    assert progress.progress_enabled(True)
    assert not progress.live_plot_enabled(True)  # no IPython kernel here
    trainer = Trainer(model(), TRAIN, VALID, TrainConfig(epochs=1, batch_size=10, eval_batch_size=5, max_batches=2))
    bar, plot = [c for c in trainer.callbacks if isinstance(c, (ProgressBar, LivePlot))]
    trainer.fit()
    assert bar.bar is None and not plot.active
    monkeypatch.delenv("CI")
    monkeypatch.setattr(progress.config, "SCALE", "cpu")
    assert progress.progress_enabled(None)


def test_progress_bar_and_plot_render(capsys):
    given = ProgressBar(every=2, enabled=True)
    history = Trainer(model(), TRAIN, VALID, config(epochs=2, optimizer="ntasgd", nonmono=1, progress=False),
                      callbacks=[given]).fit()
    assert "epoch   2 | train ppl" in capsys.readouterr().out
    png = LivePlot(floor=3.2).render(history.rows)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000


def test_live_plot_records_running_points_within_an_epoch():
    class Recorder(LivePlot):
        def on_train_begin(self, trainer):
            super().on_train_begin(trainer)
            self.active, self.shown = True, 0       # as in a notebook kernel

        def _show(self, rows):
            self.shown += 1
            self.first = getattr(self, "first", len(rows) + len(self.points))  # points when first drawn
            self._last = 0.0

    plot = Recorder(redraw_s=0.0)
    Trainer(model(), TRAIN, VALID, config(epochs=2, progress=False), callbacks=[plot]).fit()
    xs = [p[0] for p in plot.points]
    assert len(xs) >= 4 and xs == sorted(xs) and 0 < xs[0] < 1 < xs[-1] <= 2
    assert all(p[1] > 1 and p[2] is None for p in plot.points)
    assert plot.first == 2 and plot.shown >= len(xs) - 1   # drawn from the second point on, never empty
    assert plot.render([], plot.points)[:8] == b"\x89PNG\r\n\x1a\n"


def test_live_plot_reads_plainly():
    rows = [dict(epoch=e, train_ppl=t, valid_ppl=v, optimizer="sgd")
            for e, t, v in [(1, 180.0, 120.0), (2, 95.0, 80.0), (3, 70.0, 66.0)]]
    plot = LivePlot(floor=22.5, floor_label="oracle")
    fig = plot.figure(rows, [(0.5, 600.0, None), (1.0, 190.0, None)], planned=8)
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_xlim()[0] == 0 and 8 <= ax.get_xlim()[1] < 8.5         # the whole run, from the start
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"[\d,.]+", t) for t in labels), labels   # 20, 50, 100: no 2x10^1
    assert "50" in labels and "100" in labels
    legend, axes_box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= axes_box.x1                                       # beside the curves, not on them
    assert any(t.get_text() == "oracle 22.5" for t in ax.texts)            # the floor says what it is
    assert ax.get_ylim()[0] < 22.5 < 600 < ax.get_ylim()[1]
    assert not plot.drawable([]) and plot.drawable(rows[:2])
    plot.points = [(0.5, 600.0, None)]
    assert not plot.drawable([]) and plot.drawable(rows[:1])


def test_live_plot_validates_a_slice_every_k_batches():
    plot = LivePlot(valid=VALID[:200], every=3, enabled=False)
    trainer = Trainer(model(), TRAIN, VALID, config(epochs=2, progress=False), callbacks=[plot])
    history = trainer.fit()
    per_epoch = trainer.batches_per_epoch()
    assert len(plot.points) == 2 * (per_epoch // 3 + (per_epoch % 3 > 0))
    assert all(p[2] is not None and p[2] > 1 for p in plot.points)
    assert plot.points[-1][0] == pytest.approx(2.0)
    assert len(history.rows) == 2
    with pytest.raises(ValueError, match="both valid="):
        LivePlot(every=3)


# ------------------------------------------------------------------ gradient accumulation

class GradientSpy(Callback):
    """Record the gradient every optimizer step sees (before the step)."""

    def __init__(self):
        self.grads = []

    def on_train_begin(self, trainer):
        opt, step = trainer.optimizer, trainer.optimizer.step

        def spying_step(*args, **kwargs):
            self.grads.append([p.grad.detach().clone() for p in trainer.params])
            return step(*args, **kwargs)
        opt.step = spying_step


@pytest.mark.parametrize("small", [1, 2, 5])
def test_small_batches_accumulate_exactly_the_full_batch_gradient(small):
    """Dropout off: sub-batches with their own carried states give the whole batch's gradient, step after step."""
    spies = {}
    for size in (None, small):
        m = model().double()
        spies[size] = GradientSpy()
        Trainer(m, TRAIN, VALID, config(epochs=1, max_batches=4, clip=0, alpha=2.0, beta=1.0, variable_bptt=True,
                                        small_batch_size=size), callbacks=[spies[size]]).fit()
    full, accumulated = spies[None].grads, spies[small].grads
    assert len(full) == len(accumulated) == 4
    for g_full, g_acc in zip(full, accumulated):
        for a, b in zip(g_full, g_acc):
            torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


def test_small_batches_carry_their_own_state_from_window_to_window():
    """With lr = 0 the weights stay put, so step k's gradient is that of window k read from the state
    the earlier windows left: computed here by hand on the whole batch."""
    m = model().double()
    source = batchify(TRAIN, 10)
    expected, state = [], None
    for k in range(3):
        x, y = source[10 * k:10 * k + 10], source[10 * k + 1:10 * k + 11]
        out = m.train()(x, state)
        m.zero_grad()
        F.cross_entropy(out.logits.reshape(-1, V), y.reshape(-1)).backward()
        expected.append([p.grad.clone() for p in m.parameters()])
        state = m.detach_state(out.state)
    spy = GradientSpy()
    Trainer(model().double(), TRAIN, VALID, config(epochs=1, max_batches=3, lr=0.0, clip=0, small_batch_size=2),
            callbacks=[spy]).fit()
    for got, want in zip(spy.grads, expected):
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_small_batches_train_to_the_same_weights():
    runs = []
    for size in (None, 5):
        m = model()
        h = Trainer(m, TRAIN, VALID, config(epochs=2, max_batches=6, small_batch_size=size)).fit()
        runs.append((weights(m), h))
    (w_full, h_full), (w_acc, h_acc) = runs
    for k in w_full:
        torch.testing.assert_close(w_acc[k], w_full[k], rtol=0, atol=1e-6)
    assert h_acc.column("train_loss") == pytest.approx(h_full.column("train_loss"), abs=1e-6)


@pytest.mark.cuda
def test_small_batches_on_cuda_accumulate_the_full_batch_gradient():
    spies = {}
    for size in (None, 2):
        spies[size] = GradientSpy()
        trainer = Trainer(model(), TRAIN, VALID, config(epochs=1, max_batches=3, clip=0, small_batch_size=size),
                          callbacks=[spies[size]])
        trainer.fit()
        assert trainer.model.device.type == "cuda"
    for g_full, g_acc in zip(spies[None].grads, spies[2].grads):
        for a, b in zip(g_full, g_acc):
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


def test_small_batch_size_and_sequence_cap_are_checked():
    with pytest.raises(ValueError, match=r"small_batch_size=3 does not divide batch_size=10: use a divisor"):
        config(small_batch_size=3)
    assert config(small_batch_size=20).small_batch_size == 20  # larger than the batch: no accumulation
    with pytest.raises(ValueError, match=r"max_seq_len_delta must be an integer >= 0"):
        config(max_seq_len_delta=-1)
    with pytest.raises(ValueError, match=r"bptt \+ max_seq_len_delta = 3 is below the shortest window"):
        config(bptt=3, max_seq_len_delta=0)


def test_max_seq_len_delta_caps_variable_windows():
    seen = {}
    for delta in (None, 2):
        class Lengths(Callback):
            def on_batch_end(self, trainer, batch_idx, loss):
                seen.setdefault(delta, []).append(trainer.seq_len)
        Trainer(model(), TRAIN, VALID, config(epochs=2, variable_bptt=True, max_seq_len_delta=delta),
                callbacks=[Lengths()]).fit()
    assert max(seen[None]) > 12 and max(seen[2]) == 12  # bptt 10 + 2


# ---------------------------------------------------------------- heads that return log-probabilities

class ShiftedLogProbHead(torch.nn.Module):
    """log_softmax(W g + b) + c: declared as log-probabilities, so the loss must take them as they are."""

    returns_log_probs = True

    def __init__(self, config, embedding, in_size, shift=0.5):
        super().__init__()
        self.decoder = torch.nn.Linear(in_size, config.vocab_size)
        self.shift = shift

    def forward(self, g):
        return F.log_softmax(self.decoder(g), dim=-1) + self.shift  # (T, B, V)


def test_log_probability_heads_are_scored_with_nll_not_a_second_softmax():
    from lmcourse.networks.loss import returns_log_probs, token_nll
    from lmcourse.networks.models import register_head
    register_head("test-shifted-log-probs", ShiftedLogProbHead)
    plain, shifted = model(tie=False), model(tie=False, head="test-shifted-log-probs")
    shifted.load_state_dict(plain.state_dict())
    assert returns_log_probs(shifted) and not returns_log_probs(plain)
    source = batchify(VALID, 5)
    assert evaluate(shifted, source, 10) == pytest.approx(evaluate(plain, source, 10) - 0.5, abs=1e-6)
    z, y = torch.randn(4, 3, V), torch.randint(0, V, (4, 3))
    torch.testing.assert_close(token_nll(F.log_softmax(z, -1), y, log_probs=True), token_nll(z, y, log_probs=False))
    first = {}
    for name, m in (("plain", plain), ("shifted", shifted)):
        class First(Callback):
            def on_batch_end(self, trainer, batch_idx, loss):
                first.setdefault(name, float(loss))
        Trainer(m, TRAIN, VALID, config(epochs=1, max_batches=1), callbacks=[First()]).fit()
    assert first["shifted"] == pytest.approx(first["plain"] - 0.5, abs=1e-5)


# ------------------------------------------------------------------------- hardening

def test_unwritable_paths_are_refused_before_training(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    batches = []

    class Count(Callback):
        def on_batch_end(self, trainer, batch_idx, loss):
            batches.append(batch_idx)

    m = model().train()
    with pytest.raises(ValueError, match=r"TrainConfig.checkpoint='.*a-file/best.pt' cannot be written, its folder "
                                         r"is not writable \(.+\): choose a path in a folder you can write to."):
        Trainer(m, TRAIN, VALID, config(checkpoint=blocker / "best.pt"), callbacks=[Count()]).fit()
    with pytest.raises(ValueError, match=r"TrainConfig.checkpoint='.*' is a folder: give a file path"):
        Trainer(m, TRAIN, VALID, config(checkpoint=tmp_path), callbacks=[Count()]).fit()
    with pytest.raises(ValueError, match=r"TrainConfig.out_dir='.*a-file' is a file, not a folder"):
        Trainer(m, TRAIN, VALID, config(out_dir=blocker), callbacks=[Count()]).fit()
    with pytest.raises(ValueError, match=r"TrainConfig.out_dir='.*a-file/run' cannot be written \(.+\)"):
        Trainer(m, TRAIN, VALID, config(out_dir=blocker / "run"), callbacks=[Count()]).fit()
    assert batches == [] and m.training  # nothing trained, nothing touched


def test_an_exception_inside_fit_restores_the_best_weights_and_says_why(tmp_path):
    class Fail(Callback):
        def on_batch_end(self, trainer, batch_idx, loss):
            if trainer.epoch == 2 and batch_idx == 2:
                raise RuntimeError("disk full")

    m = model()
    trainer = Trainer(m, TRAIN, VALID, config(epochs=3, out_dir=tmp_path / "run"), callbacks=[Fail()])
    with pytest.raises(RuntimeError, match="disk full"):
        trainer.fit()
    history = trainer.history
    assert history.stop_reason == "error: RuntimeError" and history.best["epoch"] == 1 and not m.training
    saved, _ = load_checkpoint(tmp_path / "run" / "best.pt", map_location="cpu")
    assert same_weights(weights(saved), weights(m))
    assert valid_loss_now(trainer) == pytest.approx(history.best["valid_loss"], abs=1e-12)
    assert json.loads((tmp_path / "run" / "history.json").read_text())["stop_reason"] == "error: RuntimeError"


def test_ctrl_c_during_a_best_save_leaves_history_in_step_with_the_file(tmp_path, monkeypatch):
    import lmcourse.training.trainer as train_module
    real, calls = train_module.save_checkpoint, []

    def interrupted_on_second_save(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as if Ctrl-C came while the file was being written
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "save_checkpoint", interrupted_on_second_save)
    m, path = model(), tmp_path / "best.pt"
    history = Trainer(m, TRAIN, VALID, config(epochs=4, lr=20.0, checkpoint=path)).fit()
    assert history.stop_reason == "interrupted" and len(calls) == 2 and len(history) == 2
    assert history.rows[1]["valid_loss"] < history.rows[0]["valid_loss"]  # epoch 2 was better, but not saved
    saved, info = load_checkpoint(path, map_location="cpu")
    assert history.best["epoch"] == info["extra"]["epoch"] == 1
    assert same_weights(weights(saved), weights(m))
