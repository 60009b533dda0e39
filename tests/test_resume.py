"""The run directory and exact resume: an interrupted run, resumed, ends bit for bit where an
uninterrupted one does (dropout on, variable BPTT, NT-ASGD switching before or after the break)."""
import json
from unittest import mock

import pytest
import torch
from test_train import TRAIN, VALID, V, model, same_weights, weights

from lmcourse import checksum
from lmcourse.networks.models import LMConfig
from lmcourse.training.callbacks import Callback
from lmcourse.training.checkpoint import load_checkpoint
from lmcourse.training.rundir import RunDir
from lmcourse.training.trainer import TrainConfig, Trainer, load_run_config
from lmcourse.vocab import Vocab

DROPOUTS = dict(dropout=0.3, dropouth=0.2, dropouti=0.2, dropoute=0.1, wdrop=0.3)
EPOCHS, SWITCH = 5, 3  # NT-ASGD switches at the end of epoch 3 (forced by Spoil)


class Spoil(Callback):
    """Add noise (from its own generator) after the batch 18 of epoch 3, so that epoch's
    validation is worse than epoch 1's and NT-ASGD (nonmono=1) switches."""

    def on_batch_end(self, trainer, batch_idx, loss):
        if trainer.epoch == SWITCH and batch_idx == 17:
            g = torch.Generator().manual_seed(batch_idx)
            with torch.no_grad():
                for p in trainer.model.parameters():
                    p.add_(1.0 * torch.randn(p.shape, generator=g).to(p.device))  # drawn on the CPU, for any device


class Break(Callback):
    """Ctrl-C (or ``trainer.stop``) at the end of an epoch, or at a batch inside it."""

    def __init__(self, epoch, batch=None, how="interrupt"):
        self.epoch, self.batch, self.how = epoch, batch, how

    def _break(self, trainer):
        if self.how == "interrupt":
            raise KeyboardInterrupt
        trainer.stop = True

    def on_batch_end(self, trainer, batch_idx, loss):
        if (trainer.epoch, batch_idx) == (self.epoch, self.batch):
            self._break(trainer)

    def on_epoch_end(self, trainer, row):
        if self.batch is None and row["epoch"] == self.epoch:
            self._break(trainer)


def settings(out_dir, **kw):
    cfg = dict(epochs=EPOCHS, batch_size=10, eval_batch_size=5, bptt=10, lr=5.0, optimizer="ntasgd", nonmono=1,
               variable_bptt=True, alpha=2.0, beta=1.0, out_dir=out_dir, progress=False, live_plot=False)
    cfg.update(kw)
    return TrainConfig(**cfg)


def run(out_dir, callbacks=(), resume=False, seed=0, on="cpu", **kw):
    """Train (on the CPU unless told: bit-identity is a CPU claim) and return the model and history."""
    m = model(seed=seed, **DROPOUTS)
    trainer = Trainer(m, TRAIN, VALID, settings(out_dir, **kw), callbacks=[Spoil(), *callbacks])
    with mock.patch("lmcourse.training.trainer.device", lambda: torch.device(on)):
        history = trainer.fit(resume=resume)
    return m, history


def last(out_dir):
    return torch.load(RunDir(out_dir).file("last.pt"), map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    m, history = run(out)
    assert history.stop_reason == "completed"
    assert history.column("optimizer") == ["sgd"] * SWITCH + ["asgd"] * (EPOCHS - SWITCH)
    return out, weights(m), history


def assert_same_run(out, m, history, reference):
    ref_out, ref_weights, ref_history = reference
    assert history.stop_reason == "completed" and len(history) == EPOCHS
    for key in ("train_loss", "valid_loss", "optimizer", "lr", "ar", "tar", "averaged"):
        assert history.column(key) == ref_history.column(key), key
    assert history.best == {**ref_history.best, **{k: history.best[k] for k in ("tokens_per_s", "elapsed_s")}}
    assert same_weights(weights(m), ref_weights)  # the best (averaged) weights
    a, b = last(out), last(ref_out)
    assert same_weights(a["state_dict"], b["state_dict"])  # the raw weights the next step would read
    opt_a, opt_b = a["optimizer"]["state"]["state"], b["optimizer"]["state"]["state"]
    assert a["optimizer"]["name"] == b["optimizer"]["name"] == "asgd" and opt_a.keys() == opt_b.keys()
    for i in opt_a:
        assert same_weights(opt_a[i], opt_b[i])  # including ASGD's averages 'ax'


@pytest.mark.parametrize("epoch,batch,how", [
    (2, None, "interrupt"),  # Ctrl-C after epoch 2: the switch to ASGD comes after the break
    (4, None, "interrupt"),  # after epoch 4: ASGD is active, its averages must come back
    (3, 2, "interrupt"),     # inside epoch 3: resumes from the end of epoch 2 and repeats epoch 3
    (2, None, "stop"),       # trainer.stop at the end of epoch 2
    (4, 3, "stop"),          # trainer.stop inside epoch 4: resumes from the end of epoch 3
])
def test_an_interrupted_run_resumes_exactly(tmp_path, reference, epoch, batch, how):
    _, history = run(tmp_path, [Break(epoch, batch, how)])
    assert history.stop_reason == ("interrupted" if how == "interrupt" else "callback")
    finished = epoch if batch is None else epoch - 1
    assert last(tmp_path)["epoch"] == finished
    m, history = run(tmp_path, resume=True, seed=123)  # a fresh model with other weights: all comes from disk
    assert_same_run(tmp_path, m, history, reference)


def test_a_finished_run_extends_to_more_epochs_exactly(tmp_path, reference):
    _, history = run(tmp_path, epochs=3)
    assert history.stop_reason == "completed" and len(history) == 3
    m, history = run(tmp_path, resume=True, seed=7, epochs=EPOCHS)
    assert_same_run(tmp_path, m, history, reference)


def test_the_run_directory_holds_config_history_best_last_and_curves(tmp_path, reference):
    out, ref_weights, ref_history = reference
    run_dir = RunDir(out)
    assert {p.name for p in out.iterdir()} == {"config.json", "history.json", "best.pt", "last.pt", "curves.png"}
    model_config, train_config = load_run_config(out)
    assert model_config == LMConfig(vocab_size=V, emb_size=8, hidden_size=16, num_layers=2, tie=True, **DROPOUTS)
    assert train_config == settings(str(out))
    stored = json.loads(run_dir.file("history.json").read_text())
    assert stored["stop_reason"] == "completed" and stored["rows"] == ref_history.rows
    assert stored["best"] == ref_history.best and stored["start"] == ref_history.start
    assert ref_history.start["valid_loss"] > ref_history.best["valid_loss"]
    best, info = load_checkpoint(run_dir.file("best.pt"), map_location="cpu")
    assert same_weights(weights(best), ref_weights) and info["extra"]["epoch"] == ref_history.best["epoch"]
    state = last(out)
    assert state["epoch"] == EPOCHS and state["val_losses"] == ref_history.column("valid_loss")
    assert state["optimizer"]["name"] == "asgd"
    assert all("ax" in s for s in state["optimizer"]["state"]["state"].values())
    assert set(state["rng"][0]) >= {"torch", "python", "numpy"} and state["bptt_generator"].dtype == torch.uint8
    assert run_dir.file("curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]  # no temporary files left behind


def test_resuming_refuses_another_model_vocabulary_or_settings(tmp_path):
    run(tmp_path, [Break(1)])
    with pytest.raises(ValueError, match=r"has a model with hidden_size=16 but this model has hidden_size=24: "
                                         r"build the model from .*config.json"):
        Trainer(model(hidden_size=24, **DROPOUTS), TRAIN, VALID, settings(tmp_path)).fit(resume=True)
    with pytest.raises(ValueError, match=r"was trained with lr=5.0 but this TrainConfig has lr=3.0: resume with the "
                                         r"same settings \(only epochs, progress, live_plot, checkpoint, out_dir, checkpoint_every and tf32"):
        Trainer(model(**DROPOUTS), TRAIN, VALID, settings(tmp_path, lr=3.0)).fit(resume=True)
    other = model(**DROPOUTS)
    other.vocab = Vocab(["<eos>"] + [f"v{i}" for i in range(V - 1)])
    with pytest.raises(ValueError, match=r"vocabulary .* differs"):
        Trainer(other, TRAIN, VALID, settings(tmp_path)).fit(resume=True)
    assert last(tmp_path)["epoch"] == 1  # nothing was overwritten


def test_a_fresh_run_refuses_a_folder_holding_a_run_and_resume_needs_one(tmp_path):
    with pytest.raises(ValueError, match=r"There is no run to resume in .* \(no last.pt\)"):
        run(tmp_path / "empty", resume=True)
    with pytest.raises(ValueError, match=r"fit\(resume=True\) needs TrainConfig.out_dir"):
        Trainer(model(), TRAIN, VALID, TrainConfig(epochs=1, batch_size=10, eval_batch_size=5)).fit(resume=True)
    _, history = run(tmp_path / "auto", resume="auto", epochs=1)  # nothing to resume: starts afresh
    assert len(history) == 1
    with pytest.raises(ValueError, match=r"already holds a run that can be continued: continue it with "
                                         r"fit\(resume=True\), start over with fit\(overwrite=True\)"):
        run(tmp_path / "auto", epochs=2)
    _, history = run(tmp_path / "auto", resume="auto", epochs=2)
    assert history.column("epoch") == [1, 2]
    with pytest.raises(ValueError, match=r"fit\(resume=...\) takes False, True or 'auto'"):
        run(tmp_path / "auto", resume="yes")


def test_a_damaged_last_checkpoint_is_explained(tmp_path):
    run(tmp_path, epochs=1)
    path = RunDir(tmp_path).file("last.pt")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"last.pt is damaged or not an lmcourse run \(\w+\): resume from an intact"):
        run(tmp_path, resume=True, epochs=2)
    torch.save({"format": 1, "kind": "something else"}, path)
    with pytest.raises(ValueError, match=r"is not an lmcourse run's last.pt"):
        run(tmp_path, resume=True, epochs=2)


@pytest.mark.cuda
def test_a_run_on_cuda_resumes_with_its_cuda_random_states(tmp_path):
    m_ref, h_ref = run(tmp_path / "ref", on="cuda")
    run(tmp_path / "run", [Break(2)], on="cuda")
    assert "cuda" in last(tmp_path / "run")["rng"][0]
    m, history = run(tmp_path / "run", resume=True, seed=9, on="cuda")
    assert history.column("optimizer") == h_ref.column("optimizer")
    assert history.column("valid_loss") == pytest.approx(h_ref.column("valid_loss"), abs=1e-4)
    for k, v in weights(m_ref).items():  # GPU kernels may sum in another order: close, not always identical
        torch.testing.assert_close(weights(m)[k], v, rtol=0, atol=1e-4)


def test_resuming_with_another_number_of_processes_warns_and_continues(tmp_path):
    run(tmp_path, epochs=1)
    path = RunDir(tmp_path).file("last.pt")
    state = torch.load(path, weights_only=True)
    state["rng"] = state["rng"] * 2  # as if two processes had saved it
    torch.save(checksum.seal(state), path)
    with pytest.warns(RuntimeWarning, match=r"saved by 2 processes and resumes with 1: it continues, but not bit"):
        _, history = run(tmp_path, resume=True, epochs=2)
    assert history.stop_reason == "completed" and history.column("epoch") == [1, 2]


def test_a_run_that_stopped_on_the_non_monotone_trigger_stays_stopped_when_resumed(tmp_path):
    m_stopped, history = run(tmp_path, stop_nonmono=True)
    assert history.stop_reason == "non-monotone" and len(history) == SWITCH  # Spoil makes epoch 3 fire it
    assert last(tmp_path)["epoch"] == SWITCH and last(tmp_path)["stop_reason"] == "non-monotone"
    for epochs in (EPOCHS, EPOCHS + 3):  # even with more epochs asked for, the stop holds
        m, history = run(tmp_path, resume=True, seed=5, stop_nonmono=True, epochs=epochs)
        assert history.stop_reason == "non-monotone" and len(history) == SWITCH
        assert same_weights(weights(m), weights(m_stopped))
        assert last(tmp_path)["epoch"] == SWITCH
    # the check can fail: a last.pt that forgot the stop (as if killed before it was recorded) trains on
    path = RunDir(tmp_path).file("last.pt")
    state = torch.load(path, weights_only=True)
    state["stop_reason"] = None
    torch.save(checksum.seal(state), path)
    _, history = run(tmp_path, resume=True, stop_nonmono=True, epochs=EPOCHS + 3)
    assert len(history) > SWITCH
