"""The trainer's speed settings: bf16 autocast (its perplexity bounded against float32 on a short run),
``last.pt`` every N epochs with ``best.pt`` on every improvement, TF32 as an explicit setting."""
import math

import pytest
import torch
from test_train import TRAIN, VALID, model, weights

from lmcourse.networks.mos import mos_log_probs
from lmcourse.training.rundir import RunDir
from lmcourse.training.trainer import TrainConfig, Trainer

SHORT = dict(epochs=3, batch_size=8, eval_batch_size=4, bptt=10, lr=2.0, clip=0.25, progress=False, live_plot=False)


def _train(device: str, bf16: bool, **kw):
    """A short run on ``device``; the model and its final validation perplexity."""
    m = model(dropout=0.0, dropouth=0.0, dropouti=0.0)
    history = Trainer(m, TRAIN, VALID, TrainConfig(**SHORT, bf16=bf16, **kw)).fit()
    return m, history.rows[-1]["valid_ppl"]


def _bf16_run_stays_close(monkeypatch, device: str) -> None:
    monkeypatch.setenv("LMCOURSE_DEVICE", device)
    m32, ppl32 = _train(device, bf16=False)
    m16, ppl16 = _train(device, bf16=True)
    assert ppl32 < 0.7 * 12  # it learned: well below a uniform guess over V = 12 words
    assert abs(math.log(ppl16 / ppl32)) < 0.05, (ppl16, ppl32)  # within 5% of float32's perplexity
    assert any(not torch.equal(a, b) for a, b in zip(weights(m16).values(), weights(m32).values()))  # bf16 did act
    assert all(p.dtype == torch.float32 for p in m16.parameters())  # the weights stay float32


def test_bf16_autocast_stays_within_5_percent_of_float32(monkeypatch):
    _bf16_run_stays_close(monkeypatch, "cpu")


@pytest.mark.cuda
def test_bf16_autocast_on_cuda_stays_within_5_percent_of_float32(monkeypatch):
    _bf16_run_stays_close(monkeypatch, "cuda")


def test_the_mixture_head_mixes_in_float32_under_autocast():
    g = torch.Generator().manual_seed(0)
    h, w = torch.randn(6, 3, 4, generator=g), torch.randn(20, 4, generator=g)  # (N, K, E), (V, E)
    b, log_pi = torch.randn(20, generator=g), torch.randn(6, 3, generator=g).log_softmax(-1)
    plain = mos_log_probs(h, w, b, log_pi)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = mos_log_probs(h, w, b, log_pi)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, plain, rtol=0, atol=1e-6)


def test_last_pt_every_n_epochs_and_at_the_end(monkeypatch, tmp_path):
    monkeypatch.setenv("LMCOURSE_DEVICE", "cpu")
    saved = []
    real = RunDir.save_last

    def spy(self, state):
        saved.append(state["epoch"])
        return real(self, state)

    monkeypatch.setattr(RunDir, "save_last", spy)
    m = model()
    cfg = TrainConfig(**{**SHORT, "epochs": 5}, checkpoint_every=2, out_dir=str(tmp_path / "run"))
    history = Trainer(m, TRAIN, VALID, cfg).fit()
    assert saved == [2, 4, 5] and len(history.rows) == 5
    assert (tmp_path / "run" / "best.pt").is_file()  # written whenever validation improved
    with pytest.raises(ValueError, match="checkpoint_every must be a positive integer"):
        TrainConfig(epochs=1, checkpoint_every=0)


def test_tf32_is_set_when_the_run_starts(monkeypatch):
    monkeypatch.setenv("LMCOURSE_DEVICE", "cpu")
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        for flag in (True, False):
            Trainer(model(), TRAIN, VALID, TrainConfig(**{**SHORT, "epochs": 1}, max_batches=1, tf32=flag)).fit()
            assert torch.backends.cuda.matmul.allow_tf32 is flag and torch.backends.cudnn.allow_tf32 is flag
        with pytest.raises(ValueError, match="tf32 must be True or False or None"):
            TrainConfig(epochs=1, tf32="on")
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_a_run_saved_before_these_settings_existed_still_resumes(monkeypatch, tmp_path):
    monkeypatch.setenv("LMCOURSE_DEVICE", "cpu")
    out = str(tmp_path / "run")
    Trainer(model(), TRAIN, VALID, TrainConfig(**{**SHORT, "epochs": 1}, out_dir=out)).fit()
    run = RunDir(out)
    state = run.load_last()
    for name in ("checkpoint_every", "bf16", "tf32"):
        del state["train_config"][name]
    run.save_last(state)
    history = Trainer(model(), TRAIN, VALID, TrainConfig(**{**SHORT, "epochs": 2}, out_dir=out)).fit(resume=True)
    assert len(history.rows) == 2
