"""The mixture-of-softmaxes head: exact against plain formulas, its gradient, its memory, the paper's sizes."""
import math

import pytest
import torch
import torch.nn.functional as F

import lmcourse.networks.mos as mos
from lmcourse.networks.models import RNNLM, LMConfig, SoftmaxHead
from lmcourse.networks.mos import MixtureOfSoftmaxes, mos_log_probs, mos_log_probs_reference
from lmcourse.training.callbacks import Callback
from lmcourse.training.trainer import TrainConfig, Trainer
from lmcourse.vocab import Vocab

V = 29
cuda = pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)


def inputs(N=7, K=3, E=5, V_=V, dtype=torch.float64, scale=1.0, seed=0, device="cpu"):
    """h (N, K, E), weight (V, E), bias (V,), log_pi (N, K), all requiring grad."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, K, E, generator=g, dtype=dtype) * scale
    weight = torch.randn(V_, E, generator=g, dtype=dtype)
    bias = torch.randn(V_, generator=g, dtype=dtype)
    log_pi = F.log_softmax(torch.randn(N, K, generator=g, dtype=dtype) * scale, -1)
    return [t.to(device).requires_grad_() for t in (h, weight, bias, log_pi)]


def tiny_model(seed=0, **kw) -> RNNLM:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=V, emb_size=6, hidden_size=9, num_layers=2, tie=True, head="mos", n_experts=4)
    cfg.update(kw)
    model = RNNLM(LMConfig(**cfg))
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


def stream(n, seed=1):
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of two rows, so every loop over chunks runs several times."""
    monkeypatch.setattr(mos, "CHUNK_ELEMENTS", 2 * 3 * V)


# --------------------------------------------------------------------------- the mixture itself

@pytest.mark.parametrize("K", [1, 3])
def test_equals_the_reference_and_sums_to_one(K, small_chunks):
    h, weight, bias, log_pi = inputs(K=K)
    log_p = mos_log_probs(h, weight, bias, log_pi)  # (N, V)
    assert log_p.shape == (7, V)
    torch.testing.assert_close(log_p, mos_log_probs_reference(h, weight, bias, log_pi), rtol=0, atol=1e-12)
    torch.testing.assert_close(log_p.exp().sum(-1), torch.ones(7, dtype=torch.float64), rtol=0, atol=1e-12)


def test_is_the_explicit_sum_of_weighted_softmaxes(small_chunks):
    h, weight, bias, log_pi = inputs(K=3)
    pi = log_pi.exp()  # (N, K)
    p = sum(pi[:, k:k + 1] * torch.softmax(h[:, k] @ weight.T + bias, -1) for k in range(3))  # (N, V)
    torch.testing.assert_close(mos_log_probs(h, weight, bias, log_pi), p.log(), rtol=0, atol=1e-12)


def test_leading_dimensions_are_kept():
    h, weight, bias, log_pi = inputs(N=12)
    flat = mos_log_probs(h, weight, bias, log_pi)  # (12, V)
    shaped = mos_log_probs(h.view(4, 3, 3, 5), weight, bias, log_pi.view(4, 3, 3))  # (4, 3, V)
    torch.testing.assert_close(shaped.reshape(12, V), flat, rtol=0, atol=0)


def test_gradcheck_in_float64(small_chunks):
    args = inputs(N=5, K=3, E=4, V_=11)
    assert torch.autograd.gradcheck(mos_log_probs, tuple(args))


@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_gradient_equals_the_reference(scale, small_chunks):
    args = inputs(scale=scale)
    g = torch.randn(7, V, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    ours = torch.autograd.grad(mos_log_probs(*args), args, g)
    ref = torch.autograd.grad(mos_log_probs_reference(*args), args, g)
    for a, b, name in zip(ours, ref, ("h", "weight", "bias", "log_pi")):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9, msg=f"gradient of {name} differs")


def test_tiny_probabilities_stay_exact_in_float32(small_chunks):
    """Probabilities far below float32's range come out right (the paper's log(p + 1e-8) floors them at -18.4)."""
    args64 = inputs(scale=30.0)  # logits in the hundreds: most probabilities underflow in float32
    args32 = [t.detach().float().requires_grad_() for t in args64]
    ref = mos_log_probs_reference(*args64)
    assert (ref < math.log(torch.finfo(torch.float32).tiny)).float().mean() > 0.3  # the hard case is exercised
    ours = mos_log_probs(*args32)
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours.double(), ref, rtol=1e-5, atol=1e-4)
    g = torch.randn(7, V, generator=torch.Generator().manual_seed(4))
    for a, b in zip(torch.autograd.grad(ours, args32, g), torch.autograd.grad(ref, args64, g.double())):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-4 * b.abs().max().item())


def saved_bytes(fn, *args) -> int:
    """Bytes of the distinct storages autograd keeps for backward while ``fn(*args)`` runs."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return sum(storages.values())


def test_keeps_the_k_by_v_tensor_once():
    N, K, E, V_ = 64, 8, 16, 500
    args = inputs(N=N, K=K, E=E, V_=V_, dtype=torch.float32)
    one_copy = N * K * V_ * 4  # bytes of the (N, K, V) logits
    ours, ref = saved_bytes(mos_log_probs, *args), saved_bytes(mos_log_probs_reference, *args)
    assert one_copy <= ours < 1.2 * one_copy, (ours, one_copy)
    assert ref >= 2 * one_copy, (ref, one_copy)  # what plain autograd keeps: the check can tell them apart
    with torch.no_grad():
        assert saved_bytes(mos_log_probs, *args) == 0


def _peak_rss_bytes(fn) -> int:
    """Growth of the resident set at its peak while ``fn()`` runs (Linux: the peak is reset before)."""
    def kib(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = kib("VmRSS")
    fn()
    return (kib("VmHWM") - before) * 1024


def _can_reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _can_reset_peak_rss(), reason="needs Linux's /proc/self/clear_refs to reset the peak RSS")
def test_cpu_peak_memory_holds_about_one_copy():
    N, K, E, V_ = 128, 8, 16, 16_384
    one_copy = N * K * V_ * 4  # 64 MiB of float32 logits
    peaks = {}
    for name, fn in (("ours", mos_log_probs), ("reference", mos_log_probs_reference)):
        fn(*inputs(N=4, K=K, E=E, V_=V_, dtype=torch.float32)).sum().backward()  # one-time buffers first
        args = inputs(N=N, K=K, E=E, V_=V_, dtype=torch.float32)
        peaks[name] = _peak_rss_bytes(lambda: fn(*args).sum().backward())
    assert peaks["ours"] < 1.8 * one_copy, peaks  # the logits once, a 16 MiB chunk, a few (N, V) rows
    assert peaks["reference"] > 3 * one_copy, peaks


# ------------------------------------------------------------------------------------ the head

def test_k1_head_is_a_softmax_head_on_the_latent_context():
    head = MixtureOfSoftmaxes(in_size=7, emb_size=5, vocab_size=V, n_experts=1)
    softmax = SoftmaxHead(5, V, 0.1, tied_weight=head.weight)
    with torch.no_grad():
        softmax.decoder.bias.copy_(torch.randn(V))
        head.bias.copy_(softmax.decoder.bias)
    g = torch.randn(4, 3, 7)  # (T, B, L)
    expected = F.log_softmax(softmax(torch.tanh(head.latent(g))), -1)
    torch.testing.assert_close(head(g), expected, rtol=0, atol=1e-6)


def test_head_matches_the_papers_formula():
    head = MixtureOfSoftmaxes(in_size=7, emb_size=5, vocab_size=V, n_experts=3).double()
    g = torch.randn(4, 2, 7, dtype=torch.float64)
    pi = torch.softmax(g @ head.prior.weight.T, -1)  # (T, B, K)
    h = torch.tanh(g @ head.latent.weight.T + head.latent.bias).view(4, 2, 3, 5)  # (T, B, K, E)
    p = (pi.unsqueeze(-1) * torch.softmax(h @ head.weight.T + head.bias, -1)).sum(-2)  # (T, B, V)
    torch.testing.assert_close(head(g), p.log(), rtol=0, atol=1e-12)
    assert head.prior.bias is None and head.returns_log_probs is True


def test_latent_dropout_is_locked_in_training_and_off_in_eval():
    head = MixtureOfSoftmaxes(in_size=7, emb_size=5, vocab_size=V, n_experts=3, dropoutl=0.5)
    g = torch.randn(1, 4, 7).expand(6, 4, 7)  # the same input at every one of 6 time steps
    torch.manual_seed(0)
    _, h = head.train().mixture(g)  # (T, B, K, E)
    zero = h == 0
    assert zero.any() and not zero.all()
    assert (zero == zero[:1]).all() and torch.allclose(h, h[:1].expand_as(h))  # one mask for all steps
    assert not (zero == zero[:, :1]).all()  # each sequence draws its own
    _, h_eval = head.eval().mixture(g)
    torch.testing.assert_close(h_eval, torch.tanh(head.latent(g)).view(6, 4, 3, 5))


def test_tied_and_untied_decoders():
    tied, untied = tiny_model(tie=True, last_size=6), tiny_model(tie=False, last_size=6)
    assert tied.head.weight is tied.embedding.weight
    assert untied.head.weight is not untied.embedding.weight
    assert untied.num_parameters() - tied.num_parameters() == V * 6


def test_bad_input_is_explained():
    h, weight, bias, log_pi = inputs()
    with pytest.raises(ValueError, match="log_pi must have shape"):
        mos_log_probs(h, weight, bias, log_pi[:, :2])
    with pytest.raises(ValueError, match="weight's columns"):
        mos_log_probs(h, weight[:, :4], bias, log_pi)
    with pytest.raises(ValueError, match=r"\(T, B, L\)"):
        MixtureOfSoftmaxes(7, 5, V, 3)(torch.randn(4, 7))
    with pytest.raises(ValueError, match="tied decoder"):
        MixtureOfSoftmaxes(7, 5, V, 3, tied_weight=torch.nn.Parameter(torch.zeros(V + 1, 5)))


# ------------------------------------------------------------------------ the paper's PTB model

@pytest.mark.parametrize("V_,E,H,last,K,expected", [
    (10_000, 280, 960, 620, 15, 21_500_620),  # PTB, Yang et al. 2018 ("22M")
    (10_000, 280, 960, 620, 16, 21_675_120),  # PTB with K = 16
    (33_278, 300, 1150, 650, 15, 34_909_528),  # WikiText-2 ("35M")
])
def test_parameter_count_of_the_papers_models(V_, E, H, last, K, expected):
    config = LMConfig(V_, emb_size=E, hidden_size=H, last_size=last, num_layers=3, tie=True, head="mos", n_experts=K)
    lstm = sum(4 * (o * (i + o) + 2 * o) for i, o in config.layer_sizes())
    by_hand = V_ * E + lstm + last * K + (last * K * E + K * E) + V_  # embedding, LSTMs, prior, latent, bias
    assert by_hand == expected
    assert RNNLM(config).num_parameters() == expected


# ------------------------------------------------------------------- the scoring interface

def test_stream_yields_log_probabilities_and_score_reads_them():
    model = tiny_model().double()
    tokens = stream(40)
    pieces = list(model.stream(tokens, bptt=13))
    log_p = torch.cat([lp for lp, _ in pieces])  # (N, V)
    torch.testing.assert_close(log_p.logsumexp(-1), torch.zeros(40, dtype=torch.float64), rtol=0, atol=1e-12)
    scores = model.score(tokens, bptt=13)
    torch.testing.assert_close(scores, log_p.gather(1, tokens.view(-1, 1)).squeeze(1), rtol=0, atol=1e-12)
    torch.testing.assert_close(model.score(tokens, bptt=1000), scores, rtol=0, atol=1e-12)


def test_step_interface_agrees_with_score():
    model = tiny_model(dropoutl=0.3).double()
    streams = torch.stack([stream(10, seed=s) for s in range(3)])  # (B, N)
    expected = torch.stack([model.score(s) for s in streams])  # (B, N)
    state, got = model.start(3), []
    for t in range(streams.shape[1]):
        got.append(model.next_log_probs(state).gather(1, streams[:, t:t + 1]).squeeze(1))
        state = model.advance(state, streams[:, t])
    torch.testing.assert_close(torch.stack(got, 1), expected, rtol=0, atol=1e-12)


def test_a_few_training_steps_lower_the_loss():
    model = tiny_model(dropoutl=0.2)
    x = stream(8 * 4, seed=5).view(8, 4)
    y = x  # a task the model can learn: name the word just read
    optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
    losses = []
    for _ in range(30):
        loss = F.nll_loss(model(x).logits.reshape(-1, V), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5


class _GradientSpy(Callback):
    """Records every parameter gradient the optimizer is about to apply."""

    def __init__(self):
        self.grads = []

    def on_train_begin(self, trainer):
        step = trainer.optimizer.step

        def spying_step(*args, **kwargs):
            self.grads.append([p.grad.detach().clone() for p in trainer.params])
            return step(*args, **kwargs)
        trainer.optimizer.step = spying_step


def test_gradient_accumulation_gives_the_full_batch_gradient_of_an_mos_model(small_chunks):
    """The trainer's sub-batches (small_batch_size, the MoS code's memory trick) on the MoS head's log-probabilities."""
    tokens = stream(1200, seed=7)
    spies = {}
    for size in (None, 2):
        spies[size] = _GradientSpy()
        config = TrainConfig(epochs=1, batch_size=6, bptt=9, lr=1.0, clip=0, max_batches=3, seed=0,
                             small_batch_size=size, progress=False, live_plot=False)
        Trainer(tiny_model().double(), tokens, tokens[:200], config, callbacks=[spies[size]]).fit()
    assert len(spies[None].grads) == len(spies[2].grads) == 3
    for full, accumulated in zip(spies[None].grads, spies[2].grads):
        for a, b in zip(full, accumulated):
            torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------------- CUDA

@cuda
def test_cuda_equals_the_reference_and_its_gradient():
    args = inputs(N=50, K=5, E=8, V_=300, dtype=torch.float32, device="cuda")
    g = torch.randn(50, 300, device="cuda")
    ours, ref = mos_log_probs(*args), mos_log_probs_reference(*args)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(torch.autograd.grad(ours, args, g), torch.autograd.grad(ref, args, g)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def _cuda_peak_bytes(fn, N, K, E, V_) -> int:
    """Peak CUDA memory of one forward and backward of ``fn`` on N rows, above what was allocated before it."""
    args = inputs(N=N, K=K, E=E, V_=V_, dtype=torch.float32, device="cuda")
    fn(*args).sum().backward()  # a first call makes what a process allocates once (cuBLAS handles, workspaces)
    for a in args:
        a.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn(*args).sum().backward()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


@cuda
def test_cuda_peak_memory_holds_one_copy():
    """What N more rows cost: the peak at 2N minus the peak at N. A library's workspace, allocated once or on
    each matrix product, does not grow with N and cancels (an H100 run measured ~34 MiB, a cuBLAS workspace's
    size on Hopper, above the head's own ~1.4 copies); the head's (N, K, V) tensors and its chunk buffer
    (a quarter of the rows) grow with N and stay in."""
    N, K, E, V_ = 256, 16, 64, 4000
    one_copy = N * K * V_ * 4  # bytes of N rows' (N, K, V) logits in float32
    cuda_rows = [mos._rows_per_chunk(n, K, V_, torch.device("cuda")) for n in (N, 2 * N)]
    assert cuda_rows[1] == 2 * cuda_rows[0]  # the chunk buffer grows with N here too: the difference counts it
    growth = {name: _cuda_peak_bytes(fn, 2 * N, K, E, V_) - _cuda_peak_bytes(fn, N, K, E, V_)
              for name, fn in (("ours", mos_log_probs), ("reference", mos_log_probs_reference))}
    assert growth["ours"] < 1.5 * one_copy, (growth, one_copy)
    assert growth["reference"] > 2 * one_copy, (growth, one_copy)


@cuda
def test_cuda_model_scores_like_the_cpu():
    model = tiny_model()
    tokens = stream(30)
    cpu = model.score(tokens)
    torch.testing.assert_close(model.to("cuda").score(tokens), cpu, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------- chunks sized for the device

def test_chunks_are_sized_for_the_device():
    K, V_ = 15, 10_000  # mos-ptb's head
    N = 70 * 12  # one step: bptt x batch rows
    cpu_rows = mos._rows_per_chunk(N, K, V_, torch.device("cpu"))
    gpu_rows = mos._rows_per_chunk(N, K, V_, torch.device("cuda"))
    assert cpu_rows * K * V_ <= mos.CHUNK_ELEMENTS and -(-N // cpu_rows) > 20  # small, cache-sized chunks
    assert gpu_rows == N // 4 and -(-N // gpu_rows) == 4  # four large chunks, a quarter of the rows each
    assert mos._rows_per_chunk(3, 2, 5, torch.device("cuda")) == 1


def test_the_tiny_entries_are_found_once_per_pass_not_per_chunk(small_chunks, monkeypatch):
    """A host sync (``nonzero``, ``tolist``) per chunk would stall the GPU ~30 times a PTB step: once per pass."""
    calls = {"nonzero": 0, "searchsorted": 0}
    for name in calls:
        real = getattr(torch, name)

        def counted(*args, _real=real, _name=name, **kw):
            calls[_name] += 1
            return _real(*args, **kw)

        monkeypatch.setattr(torch, name, counted)
    args = inputs(N=9, K=3, E=4, V_=V, dtype=torch.float64)
    assert mos._rows_per_chunk(9, 3, V, torch.device("cpu")) == 2  # five chunks
    out = mos_log_probs(*args)
    out.backward(torch.randn_like(out))
    assert calls == {"nonzero": 1, "searchsorted": 1}
