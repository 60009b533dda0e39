"""The trainer's speed settings: bf16 autocast (its perplexity bounded against float32 on a short run; on a
CPU whose kernels lack bfloat16, as torch reports it, the LSTM in float32 and one sentence), ``last.pt`` every N
epochs with ``best.pt`` on every improvement, TF32 as an explicit setting."""
import math
import warnings

import pytest
import torch
import torch.nn as nn
from test_train import TRAIN, VALID, model, weights

from lmcourse.config import cpu_bf16_kernels
from lmcourse.networks.mos import mos_log_probs
from lmcourse.training import precision
from lmcourse.training.rundir import RunDir
from lmcourse.training.trainer import TrainConfig, Trainer

SHORT = dict(epochs=3, batch_size=8, eval_batch_size=4, bptt=10, lr=2.0, clip=0.25, progress=False, live_plot=False)
NOTE = "this CPU's kernels have no bfloat16 LSTM"  # the sentence a run prints where the LSTM stays in float32


def _train(device: str, bf16: bool, seen=None, **kw):
    """A short run on ``device``; the model and its final validation perplexity. ``seen``: a dict that
    receives the dtypes the LSTM layers and the head returned in training (``"lstm"``, ``"head"``)."""
    m = model(dropout=0.0, dropouth=0.0, dropouti=0.0, **kw.pop("model", {}))
    if seen is not None:
        def spy(key):
            def record(module, args, out):  # returns None: the output goes on unchanged
                if m.training:
                    seen.setdefault(key, set()).add((out[0] if isinstance(out, tuple) else out).dtype)
            return record
        for module in m.modules():
            if isinstance(module, nn.LSTM):
                module.register_forward_hook(spy("lstm"))
        m.head.register_forward_hook(spy("head"))
    history = Trainer(m, TRAIN, VALID, TrainConfig(**SHORT, bf16=bf16, **kw)).fit()
    return m, history.rows[-1]["valid_ppl"]


def _bf16_run_stays_close(monkeypatch, device: str, **kw) -> None:
    monkeypatch.setenv("LMCOURSE_DEVICE", device)
    m32, ppl32 = _train(device, bf16=False, **kw)
    seen = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m16, ppl16 = _train(device, bf16=True, seen=seen, **kw)
    notes = [str(w.message) for w in caught if NOTE in str(w.message)]
    assert ppl32 < 0.7 * 12  # it learned: well below a uniform guess over V = 12 words
    assert abs(math.log(ppl16 / ppl32)) < 0.05, (ppl16, ppl32)  # within 5% of float32's perplexity
    assert any(not torch.equal(a, b) for a, b in zip(weights(m16).values(), weights(m32).values()))  # bf16 did act
    assert all(p.dtype == torch.float32 for p in m16.parameters())  # the weights stay float32
    assert seen["head"] == {torch.bfloat16}  # the head's matrix product ran under autocast
    if device == "cpu" and not cpu_bf16_kernels():  # torch reports no bfloat16 kernels: the fallback, said once
        assert seen["lstm"] == {torch.float32} and len(notes) == 1, (seen, notes)
        assert torch.backends.cpu.get_cpu_capability() in notes[0]
    else:  # the whole forward pass under autocast, nothing said
        assert not notes, notes
        if device == "cpu":  # oneDNN's LSTM layer is on CPU autocast's bfloat16 list
            assert seen["lstm"] == {torch.bfloat16}, seen


@pytest.mark.parametrize("wdrop", [0.0, 0.3])  # the LSTM alone, and inside WeightDrop (functional_call)
def test_bf16_autocast_stays_within_5_percent_of_float32(monkeypatch, wdrop):
    """On an AVX2 CPU (torch reports no bfloat16 kernels) the LSTM runs in float32 and the run says so in one
    sentence; on AVX-512 the whole forward pass runs under autocast. Either way within 5% of float32."""
    _bf16_run_stays_close(monkeypatch, "cpu", model=dict(wdrop=wdrop))


class _KernelSpy:
    """Stands in for ``torch._VF`` inside ``nn.LSTM``: records whether autocast was on and the input's dtype when
    the fused LSTM kernel was called, then runs the real kernel in float32 (so no machine runs a bfloat16 LSTM)."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def lstm(self, input, hx, *args):
        if torch.is_grad_enabled():  # a training step's (validation runs without gradients)
            self.calls.append((torch.is_autocast_enabled("cpu"), input.dtype))
        with torch.autocast("cpu", enabled=False):
            return self.real.lstm(input.float(), tuple(h.float() for h in hx), *args)


@pytest.mark.parametrize("kind, report, lstm_under_autocast", [
    ("AVX2 only (AMD laptops, older Intel)", (False, "AVX2"), False),
    ("AVX-512, oneDNN limited to AVX2", (False, "AVX512"), False),
    ("AVX2 in ATen, oneDNN with bfloat16", (True, "AVX2"), False),
    ("AVX-512 with oneDNN's bfloat16", (True, "AVX512"), True),
])
def test_bf16_follows_what_torch_reports_about_the_cpu(monkeypatch, kind, report, lstm_under_autocast):
    """torch's report faked for each kind of CPU: the trainer's bf16 runs the fused LSTM under autocast only where
    oneDNN takes bfloat16 and ATen's kernels are AVX-512, and otherwise outside it in float32, with one sentence."""
    import torch.nn.modules.rnn as rnn
    onednn, capability = report
    monkeypatch.setenv("LMCOURSE_DEVICE", "cpu")
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    spy = _KernelSpy(rnn._VF)
    monkeypatch.setattr(rnn, "_VF", spy)
    assert cpu_bf16_kernels() is lstm_under_autocast
    assert precision.lstm_in_float32(torch.device("cpu")) is not lstm_under_autocast
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = model()
        Trainer(m, TRAIN, VALID, TrainConfig(**{**SHORT, "epochs": 1}, max_batches=2, bf16=True)).fit()
    notes = [str(w.message) for w in caught if NOTE in str(w.message)]
    training = spy.calls  # the two training batches, two layers each
    if lstm_under_autocast:
        assert training == [(True, torch.float32)] * 4 and not notes  # autocast casts it inside the kernel
    else:
        assert training == [(False, torch.float32)] * 4, training
        assert len(notes) == 1 and capability in notes[0] and "float32" in notes[0], notes
    assert torch.is_autocast_enabled("cpu") is False  # nothing left switched on after the run
    assert not any(module._forward_pre_hooks for module in m.modules())  # and no hook left behind


def test_bf16_autocast_does_nothing_when_off():
    m = model()
    with precision.bf16_autocast(m, torch.device("cpu"), enabled=False):
        assert not torch.is_autocast_enabled("cpu")
        assert not any(module._forward_pre_hooks for module in m.modules())


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
