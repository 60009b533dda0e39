"""Dynamic evaluation (Krause et al. 2018) against plain per-segment loops written like the reference code.

The reference loops below work the way the dynamic-evaluation code does: one segment at a time,
``model.zero_grad()``, ``loss.backward()``, then ``param.data += dW`` per parameter, in float64.
"""
import copy
import math

import pytest
import torch
import torch.nn.functional as F

from lmcourse.adapt import dyneval, dyneval_steps
from lmcourse.adapt.dyneval import DynamicEval, from_old_hyperparameters, gradient_stats, grid_search, paper_grid
from lmcourse.lm import perplexity
from lmcourse.networks.models import RNNLM, LMConfig, log_softmax
from lmcourse.vocab import Vocab

V = 23


def tiny_model(seed=0, dtype=torch.float64, **config) -> RNNLM:
    torch.manual_seed(seed)
    settings = dict(emb_size=6, hidden_size=9, num_layers=2, tie=True)
    settings.update(config)
    model = RNNLM(LMConfig(V, **settings)).to(dtype)
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


def tokens(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (n,), generator=g)


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def stats(model):
    return gradient_stats(model, tokens(600, seed=7), batch_size=8, bptt=5, progress=False)


# ------------------------------------------------------------------------- reference loops

def reference_stats(model, train, batch_size, bptt):
    """MS = sqrt(sum_k g_k^2 / K), one segment at a time, as the reference code's gradstat()."""
    model = copy.deepcopy(model)
    model.eval()
    n = train.numel() // batch_size
    data = train[: n * batch_size].view(batch_size, n).t()
    ms = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    hidden, batches, i = None, 0, 0
    while i < data.size(0) - 1:
        seq_len = min(bptt, data.size(0) - 1 - i)
        x, y = data[i:i + seq_len], data[i + 1:i + 1 + seq_len]
        model.zero_grad()
        out = model(x, hidden)
        hidden = [(h.detach(), c.detach()) for h, c in out.state]
        F.cross_entropy(out.logits.reshape(-1, V), y.reshape(-1)).backward()
        for name, p in model.named_parameters():
            ms[name] = ms[name] + p.grad * p.grad
        batches, i = batches + 1, i + seq_len
    return {name: torch.sqrt(s / batches) for name, s in ms.items()}, batches


def reference_dynamic_eval(model, stream, method, lr, decay, eps, bptt, stats=None, old=False):
    """Log-probs of ``stream`` recorded before each segment's update; ``old``: the first code version's scaling.

    ``stats`` are the mean-scaled MS (``old=False``) or the sum-scaled ones, sqrt(sum g^2) (``old=True``).
    """
    model = copy.deepcopy(model)
    model.eval()
    params = list(model.parameters())
    data0 = [p.data.clone() for p in params]
    if method == "rms":
        ms = [stats[name] for name, _ in model.named_parameters()]
        gsum = sum(float(m.mean()) for m in ms)
        gsum = gsum if old else gsum / len(ms)
        decrate = [torch.clamp(m / gsum, max=1 / decay) if decay > 0 else m / gsum for m in ms]
    data = torch.cat([torch.tensor([model.vocab.eos]), stream]).view(-1, 1)
    hidden, out_logp, i = None, [], 0
    while i < data.size(0) - 1:
        seq_len = min(bptt, data.size(0) - 1 - i)
        x, y = data[i:i + seq_len], data[i + 1:i + 1 + seq_len].view(-1)
        model.zero_grad()
        out = model(x, hidden)
        hidden = [(h.detach(), c.detach()) for h, c in out.state]
        logp = F.log_softmax(out.logits.view(-1, V), dim=-1)
        out_logp.append(logp.gather(1, y.view(-1, 1)).view(-1).detach())
        F.nll_loss(logp, y).backward()
        for k, p in enumerate(params):
            if method == "rms":
                dW = decay * decrate[k] * (data0[k] - p.data) - lr * p.grad.data / (ms[k] + eps)
            else:
                dW = decay * (data0[k] - p.data) - lr * p.grad.data
            p.data += dW
        i += seq_len
    return torch.cat(out_logp)


# ---------------------------------------------------------------------------- statistics

def test_gradient_stats_equal_a_hand_loop(model, stats):
    expected, batches = reference_stats(model, tokens(600, seed=7), batch_size=8, bptt=5)
    assert stats.n_segments == batches == math.ceil((600 // 8 - 1) / 5)
    assert list(stats) == [name for name, _ in model.named_parameters()]
    for name in expected:
        torch.testing.assert_close(stats[name], expected[name], rtol=1e-10, atol=1e-14)
    assert all(bool((s > 0).any()) for s in stats.values())


def test_gradient_stats_leave_the_model_alone(model):
    before = copy.deepcopy(model.state_dict())
    model.train()
    gradient_stats(model, tokens(200), batch_size=4, bptt=3, progress=False)
    assert model.training and all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    model.eval()


# -------------------------------------------------------------------- against the reference

@pytest.mark.parametrize("method,lr,decay,bptt", [("rms", 3e-3, 0.02, 5), ("rms", 1e-2, 0.3, 7),
                                                  ("sgd", 0.5, 0.0, 5), ("sgd", 0.3, 0.1, 3)])
def test_score_equals_the_reference_loop(model, stats, method, lr, decay, bptt):
    stream = tokens(203)
    dyn = DynamicEval(model, method, lr=lr, decay=decay, eps=1e-4, bptt=bptt, stats=stats)
    ours = dyn.score(stream)
    ref = reference_dynamic_eval(model, stream, method, lr, decay, 1e-4, bptt, stats)
    assert ours.dtype == torch.float64 and ours.shape == (203,)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    static = model.score(stream)
    assert (ours - static).abs().max() > 1e-3  # it adapted


def first_prediction_gap(score_fn, model, stream, bptt):
    """Segment 1 must equal the static model; later segments must not (the weights moved)."""
    ours, static = score_fn(stream), model.score(stream)
    assert torch.allclose(ours[:bptt], static[:bptt], rtol=0, atol=1e-12), "segment 1 was not predicted by theta_0"
    assert not torch.allclose(ours[bptt:2 * bptt], static[bptt:2 * bptt], rtol=0, atol=1e-6), "no adaptation"


class UpdateFirst(DynamicEval):
    """A broken variant: the segment is scored AFTER the weights were updated on it."""

    def stream(self, tokens):
        tokens = torch.as_tensor(tokens)
        inputs = torch.cat([tokens.new_full((1,), self.eos), tokens[:-1]])
        net = dyneval.adaptation_copy(self.model)
        names, params = zip(*net.named_parameters())
        steps = self.steps(names, params)
        state = None
        for i in range(0, tokens.numel(), self.bptt):
            x, y = inputs[i:i + self.bptt].view(-1, 1), tokens[i:i + self.bptt].view(-1, 1)
            out = net(x, state)
            grads = torch.autograd.grad(dyneval._segment_nll(out.logits, y), params)
            with torch.no_grad():
                for theta, g, step in zip(params, grads, steps):
                    dyneval.update_(theta, g, step)
                out = net(x, state)  # cheating: the update has seen the targets
            state = net.detach_state(out.state)
            yield out.logits[:, 0], out.h[:, 0]


def test_predictions_precede_updates(model, stats):
    stream = tokens(60)
    dyn = DynamicEval(model, "rms", lr=3e-3, decay=0.02, eps=1e-4, bptt=5, stats=stats)
    first_prediction_gap(dyn.score, model, stream, 5)
    cheat = UpdateFirst(model, "rms", lr=3e-3, decay=0.02, eps=1e-4, bptt=5, stats=stats)
    with pytest.raises(AssertionError, match="theta_0"):
        first_prediction_gap(cheat.score, model, stream, 5)
    # the cheat also looks better than honest adaptation, which is why the order matters
    assert perplexity(cheat, stream) < perplexity(dyn, stream)


def test_scoring_twice_is_identical_and_leaves_the_model_bit_identical(model, stats):
    before = copy.deepcopy(model.state_dict())
    dyn = DynamicEval(model, "rms", lr=5e-3, decay=0.01, eps=1e-4, bptt=4, stats=stats)
    a, b = dyn.score(tokens(150)), dyn.score(tokens(150))
    assert torch.equal(a, b)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    adapted = dyn.adapt(tokens(150))
    assert any(not torch.equal(adapted[n], p) for n, p in model.named_parameters())


def test_lr_zero_is_the_static_model(model, stats):
    stream = tokens(97)
    for method in ("rms", "sgd"):
        dyn = DynamicEval(model, method, lr=0.0, decay=0.01, eps=1e-4, bptt=6, stats=stats)
        torch.testing.assert_close(dyn.score(stream), model.score(stream), rtol=0, atol=1e-12)


def test_old_hyperparameters_reproduce_the_old_scaling(model, stats):
    """The first code version (MS summed, decay rates normalised by a sum) == converted settings."""
    stream = tokens(120)
    old_ms = {name: ms * math.sqrt(stats.n_segments) for name, ms in stats.items()}  # sqrt(sum g^2)
    old = dict(lr=0.02, decay=0.2, eps=1e-3)
    ref = reference_dynamic_eval(model, stream, "rms", old["lr"], old["decay"], old["eps"], 5, old_ms, old=True)
    new = from_old_hyperparameters(**old, n_segments=stats.n_segments, n_tensors=len(stats))
    assert new["lr"] == pytest.approx(old["lr"] / math.sqrt(stats.n_segments))
    ours = DynamicEval(model, "rms", bptt=5, stats=stats, **new).score(stream)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    unconverted = DynamicEval(model, "rms", bptt=5, stats=stats, **old).score(stream)
    assert (unconverted - ref).abs().max() > 1e-3


# ------------------------------------------------------------------------ the update rule

def test_one_rms_and_one_sgd_step_by_hand():
    theta = torch.tensor([2.0, -1.0, 0.5, 3.0], dtype=torch.float64)
    theta_0 = torch.tensor([1.0, 0.0, 0.5, 1.0], dtype=torch.float64)
    g = torch.tensor([0.5, -2.0, 1.0, 0.0], dtype=torch.float64)
    ms = torch.tensor([0.25, 1.0, 4.0, 0.0], dtype=torch.float64)
    lr, decay, eps = 0.1, 0.4, 0.05
    # rms, by hand: rate = MS / mean(MS) with one tensor, clipped at 1 / decay
    mean_ms = (0.25 + 1.0 + 4.0 + 0.0) / 4
    rates = [min(m / mean_ms, 1 / decay) for m in (0.25, 1.0, 4.0, 0.0)]
    expected = [t - lr * gi / (m + eps) + decay * r * (t0 - t)
                for t, t0, gi, m, r in zip(theta.tolist(), theta_0.tolist(), g.tolist(), ms.tolist(), rates)]
    assert rates[2] == 1 / decay  # the clip is exercised
    rate = dyneval.decay_rates({"x": ms}, decay)["x"]
    torch.testing.assert_close(rate, torch.tensor(rates, dtype=torch.float64))
    got = theta.clone()
    dyneval.update_(got, g, dyneval.make_step(theta_0, lr / (ms + eps), decay * rate))
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-15)
    # sgd, by hand
    expected = [t - lr * gi + decay * (t0 - t) for t, t0, gi in zip(theta.tolist(), theta_0.tolist(), g.tolist())]
    got = theta.clone()
    dyneval.update_(got, g, dyneval.make_step(theta_0, lr, decay))
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), rtol=0, atol=1e-15)


@pytest.mark.parametrize("method,lr", [("sgd", 0.3), ("rms", 1e-3)])
def test_decay_near_one_pulls_back_to_theta_0(model, stats, method, lr):
    stream = tokens(600)

    def drift(decay):
        adapted = DynamicEval(model, method, lr=lr, decay=decay, eps=1e-4, bptt=5, stats=stats).adapt(stream)
        return math.sqrt(sum(float((adapted[n] - p.detach()).pow(2).sum()) for n, p in model.named_parameters()))

    free, held = drift(0.0), drift(0.999)
    assert held < 0.3 * free, (held, free)


# ------------------------------------------------------------------------------ dropout off

def test_dropout_is_off_throughout():
    noisy = tiny_model(dropout=0.5, dropouth=0.4, dropouti=0.3, dropoute=0.2, wdrop=0.5)
    noisy.train()
    stream = tokens(80)
    dyn = DynamicEval(noisy, "sgd", lr=0.3, decay=0.05, bptt=5)
    a, b = dyn.score(stream), dyn.score(stream)
    assert torch.equal(a, b) and noisy.training
    ref = reference_dynamic_eval(noisy, stream, "sgd", 0.3, 0.05, 0.0, 5)
    torch.testing.assert_close(a, ref, rtol=0, atol=1e-10)
    stats = gradient_stats(noisy, tokens(300), batch_size=4, bptt=5, progress=False)
    expected, _ = reference_stats(noisy, tokens(300), batch_size=4, bptt=5)
    for name in expected:
        torch.testing.assert_close(stats[name], expected[name], rtol=1e-10, atol=1e-14)


def test_adaptation_copy_modes():
    net = dyneval.adaptation_copy(tiny_model(wdrop=0.3, dropout=0.2))
    lstms = [m for m in net.modules() if isinstance(m, torch.nn.RNNBase)]
    assert lstms and all(m.training and m.dropout == 0 for m in lstms)
    others = [m for m in net.modules() if not isinstance(m, torch.nn.RNNBase)]
    assert not any(m.training for m in others)


def test_equations_cell_adapts_like_the_fast_cell(stats):
    fast, slow = tiny_model(), tiny_model(cell="equations")
    slow.load_state_dict(fast.state_dict())
    stream = tokens(50)
    a = DynamicEval(fast, "rms", lr=3e-3, decay=0.02, eps=1e-4, stats=stats).score(stream)
    b = DynamicEval(slow, "rms", lr=3e-3, decay=0.02, eps=1e-4, stats=stats).score(stream)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------- step interface

def test_step_interface_reproduces_score(model, stats):
    dyn = DynamicEval(model, "rms", lr=5e-3, decay=0.02, eps=1e-4, bptt=4, stats=stats)
    streams = torch.stack([tokens(30, seed=s) for s in (3, 4, 5)], dim=1)  # (T, 3)
    state, got = dyn.start(3), []
    for x in streams:
        got.append(dyn.next_log_probs(state).gather(1, x.view(-1, 1)).squeeze(1))
        state = dyn.advance(state, x)
    got = torch.stack(got)  # (T, 3)
    for b in range(3):
        torch.testing.assert_close(got[:, b], dyn.score(streams[:, b]), rtol=0, atol=1e-10)
    static = torch.stack([model.score(streams[:, b]) for b in range(3)], dim=1)
    assert (got - static).abs().max() > 1e-3  # the rows adapted


def test_step_interface_never_hands_aliases_of_the_model_to_functional_call(model, stats, monkeypatch):
    """cuDNN's LSTM re-flattens substituted weights with ``set_``: each must own its memory, none alias the model."""
    seen = []
    real = dyneval_steps.functional_call  # the step interface's (lmcourse.adapt.dyneval_steps)
    owned = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def spy(net, weights, args):  # the adaptation copy's own weights count too: a .detach() of them aliases them
        mine = owned | {p.untyped_storage().data_ptr() for p in net.parameters()}
        seen.extend(w.untyped_storage().data_ptr() in mine or w._is_view() for w in weights.values())
        return real(net, weights, args)

    monkeypatch.setattr(dyneval_steps, "functional_call", spy)
    dyn = DynamicEval(model, "rms", lr=5e-3, decay=0.02, eps=1e-4, bptt=3, stats=stats)
    state = dyn.start(2)
    for x in tokens(8).view(4, 2):
        state = dyn.advance(state, x)
    assert len(seen) > 10 and not any(seen)


def test_step_interface_reorder_keeps_rows_independent(model, stats):
    dyn = DynamicEval(model, "sgd", lr=0.5, decay=0.0, bptt=3)
    stream = tokens(14, seed=9)
    state = dyn.start(2)
    for x in stream[:7]:
        state = dyn.advance(state, torch.stack([x, (x + 1) % V]))
    state = dyn.reorder(state, torch.tensor([0, 0, 1]))  # row 0 twice (a beam)
    for x in stream[7:]:
        state = dyn.advance(state, torch.stack([x, x, (x + 1) % V]))
    assert torch.equal(state.log_probs[0], state.log_probs[1])
    alone = dyn.start(1)
    for x in stream:
        alone = dyn.advance(alone, x.view(1))
    torch.testing.assert_close(state.log_probs[0], alone.log_probs[0], rtol=0, atol=1e-10)
    assert not torch.allclose(state.log_probs[2], alone.log_probs[0])
    with pytest.raises(ValueError, match="one token per row"):
        dyn.advance(state, torch.tensor([1, 2]))


# ------------------------------------------------------------------------------ grid search

def test_grid_search_tries_every_pair(model, stats):
    stream = tokens(60)
    grid = grid_search(model, stream, [1e-3, 1e-2], [0.0, 0.05, 0.2], stats=stats, eps=1e-4, bptt=5, progress=False)
    assert grid.ppl.shape == (2, 3)
    i, j = 1, 2
    assert grid.ppl[i, j] == pytest.approx(perplexity(DynamicEval(model, "rms", 1e-2, 0.2, 1e-4, 5, stats), stream))
    best = grid.best
    assert best["ppl"] == float(grid.ppl.min())
    assert grid.ppl[grid.lrs.index(best["lr"]), grid.decays.index(best["decay"])] == best["ppl"]
    lrs, decays = paper_grid(20)
    assert lrs[2] == pytest.approx(5e-5 * 4) and decays[-1] == pytest.approx(5e-3 * 4) and len(lrs) == 6


# ----------------------------------------------------------------------------- bad settings

@pytest.mark.parametrize("kwargs,match", [
    (dict(method="rms", lr=-1e-3), "lr=-0.001 is outside"),
    (dict(method="sgd", decay=1.0), "decay=1 is outside"),
    (dict(method="sgd", decay=-0.1), "decay=-0.1 is outside"),
    (dict(method="adam"), "Unknown method 'adam'"),
    (dict(method="rms", stats=None), "pass stats=gradient_stats"),
    (dict(method="rms", eps=0.0), "eps=0 is outside"),
    (dict(method="sgd", bptt=0), "bptt must be a positive integer"),
    (dict(method="sgd", lr=float("nan")), "lr must be a finite number"),
])
def test_bad_settings_get_one_sentence(model, kwargs, match):
    kwargs = dict(kwargs)
    if kwargs.get("method") == "rms" and "stats" not in kwargs:
        kwargs["stats"] = {n: torch.ones_like(p) for n, p in model.named_parameters()}
    with pytest.raises(ValueError, match=match) as err:
        DynamicEval(model, **kwargs)
    message = str(err.value)
    assert message.count(". ") == 0 and message.endswith(".")


def test_bad_stats_and_models(model):
    with pytest.raises(ValueError, match="no entry for parameter"):
        DynamicEval(model, "rms", stats={"embedding.weight": model.embedding.weight})
    wrong = {n: torch.ones(3) for n, _ in model.named_parameters()}
    with pytest.raises(ValueError, match="has shape"):
        DynamicEval(model, "rms", stats=wrong)
    with pytest.raises(TypeError, match="DynamicEval adapts a neural language model"):
        DynamicEval(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        DynamicEval(model, "sgd", lr=0.1).score(torch.tensor([V + 3]))


# ------------------------------------------------------------------------------ the cache

def test_dynamic_evaluation_under_the_neural_cache(model, stats):
    from lmcourse.adapt.cache import NeuralCache, linear_cache

    stream = tokens(90)
    dyn = DynamicEval(model, "rms", lr=5e-3, decay=0.02, eps=1e-4, bptt=5, stats=stats)
    off = NeuralCache(dyn, theta=0.5, lam=0.0, window=20)
    torch.testing.assert_close(off.score(stream), dyn.score(stream), rtol=0, atol=1e-9)
    on = NeuralCache(dyn, theta=0.5, lam=0.3, window=20).score(stream)
    logits, h = map(torch.cat, zip(*dyn.stream(stream)))  # the adapting model's predictions and keys
    expected = linear_cache(log_softmax(logits), h, stream, theta=0.5, lam=0.3, window=20)
    torch.testing.assert_close(on, expected.double(), rtol=0, atol=1e-9)
    static_keys = torch.cat([h for _, h in model.stream(stream)])
    wrong = linear_cache(log_softmax(logits), static_keys, stream, theta=0.5, lam=0.3, window=20)
    assert (on - wrong.double()).abs().max() > 1e-6  # the keys are the adapting model's, not theta_0's


@pytest.mark.parametrize("mode", ["linear", "global"])
def test_the_cache_steps_over_dynamic_evaluation_as_it_scores(model, stats, mode):
    from lmcourse.adapt.cache import NeuralCache

    stream = tokens(23)
    dyn = DynamicEval(model, "rms", lr=5e-3, decay=0.02, eps=1e-4, bptt=4, stats=stats)
    cache = NeuralCache(dyn, theta=0.7, lam=0.2, alpha=0.5, window=6, mode=mode)
    state, got = cache.start(1), []
    for x in stream:
        got.append(cache.next_log_probs(state)[0, x])
        state = cache.advance(state, x.view(1))
    torch.testing.assert_close(torch.stack(got).double(), cache.score(stream), rtol=0, atol=1e-9)


# ------------------------------------------------------------------------------------- CUDA

@pytest.mark.cuda
def test_cuda_cudnn_backward_and_same_numbers_as_cpu():
    cpu = tiny_model(dtype=torch.float32, num_layers=1, emb_size=16, hidden_size=16, dropout=0.3, wdrop=0.2)
    gpu = copy.deepcopy(cpu).cuda()
    stream = tokens(120)
    stats_cpu = gradient_stats(cpu, tokens(400), batch_size=4, bptt=5, progress=False)
    stats_gpu = gradient_stats(gpu, tokens(400), batch_size=4, bptt=5, progress=False)
    for name in stats_cpu:
        torch.testing.assert_close(stats_gpu[name].cpu(), stats_cpu[name], rtol=1e-3, atol=1e-6)
    a = DynamicEval(cpu, "rms", lr=3e-3, decay=0.02, eps=1e-4, stats=stats_cpu).score(stream)
    b = DynamicEval(gpu, "rms", lr=3e-3, decay=0.02, eps=1e-4, stats=stats_gpu).score(stream.cuda())
    torch.testing.assert_close(b, a, rtol=0, atol=1e-4)
    static = gpu.score(stream.cuda())
    torch.testing.assert_close(DynamicEval(gpu, "sgd", lr=0.0).score(stream.cuda()), static, rtol=0, atol=1e-5)


@pytest.mark.cuda
def test_cuda_step_interface_adapts_like_the_cpu():
    """The step interface (what sampling reads) runs on cuDNN's LSTM and gives the CPU's numbers."""
    cpu = tiny_model(dtype=torch.float32, num_layers=2, emb_size=16, hidden_size=16)
    gpu = copy.deepcopy(cpu).cuda()
    streams = torch.stack([tokens(13, seed=s) for s in (3, 4)], dim=1)  # (T, 2)
    got = {}
    for name, m in (("cpu", cpu), ("cuda", gpu)):
        dyn = DynamicEval(m, "sgd", lr=0.3, decay=0.01, bptt=4)
        state, rows = dyn.start(2), []
        for x in streams:
            rows.append(dyn.next_log_probs(state).gather(1, x.to(dyn.device).view(-1, 1)).squeeze(1).cpu())
            state = dyn.advance(state, x)
        got[name] = torch.stack(rows)  # (T, 2)
    torch.testing.assert_close(got["cuda"], got["cpu"], rtol=0, atol=1e-4)
    assert (got["cpu"][8:] - torch.stack([cpu.score(streams[:, b]) for b in range(2)], 1)[8:]).abs().max() > 1e-4


def test_drift_scores_like_score_and_measures_the_distance_from_theta_0(model, stats):
    stream = tokens(103)
    dyn = DynamicEval(model, "sgd", lr=0.5, decay=0.0, bptt=5)
    log_p, d = dyn.drift(stream, every=4, progress=False)
    torch.testing.assert_close(log_p, dyn.score(stream), rtol=0, atol=1e-12)
    assert d.shape == (math.ceil(103 / 5) // 4,)
    after_20 = DynamicEval(model, "sgd", lr=0.5, decay=0.0, bptt=5).adapt(stream[:20])   # 4 segments of 5
    by_hand = math.sqrt(sum(float(((after_20[n] - p.detach()) ** 2).sum()) for n, p in model.named_parameters()))
    assert d[0] == pytest.approx(by_hand, rel=1e-9) and by_hand > 0
    _, still = DynamicEval(model, "rms", lr=0.0, decay=0.01, eps=1e-4, bptt=5, stats=stats).drift(stream, 2, False)
    assert torch.equal(still, torch.zeros_like(still))
    with pytest.raises(ValueError, match="every"):
        dyn.drift(stream, every=0)
