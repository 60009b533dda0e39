"""The neural cache against a float64 per-token loop written the way awd-lstm-lm's pointer.py loops."""
import math
import re

import pytest
import torch

from lmcourse.adapt import cache as cache_mod
from lmcourse.adapt.cache import CacheMemory, NeuralCache, attention, global_cache, linear_cache
from lmcourse.adapt.cache_tuning import (CacheInputs, cache_scores, cache_sums, cached, collect, grid_search,
                                        window_sweep)
from lmcourse.networks.models import RNNLM, LMConfig, log_softmax
from lmcourse.vocab import Vocab

V, H, T = 12, 8, 160


def reference(logits, h, y, theta, window, lam=None, alpha=None, skip_first=False):
    """log p(y_t) one position at a time in float64: attention over the previous `window` states,
    the one-hot history summed under it, then the linear or the global mixture."""
    logits, h, out = logits.double(), h.double(), []
    for t in range(len(y)):
        lo = max(0, t - window)
        log_p = torch.log_softmax(logits[t], 0)
        if t == lo or (skip_first and t <= window):
            out.append(float(log_p[y[t]]))
            continue
        s = theta * torch.mv(h[lo:t], h[t])                                   # (n,)
        one_hot = torch.zeros(t - lo, logits.shape[1], dtype=torch.float64)
        one_hot[torch.arange(t - lo), y[lo:t]] = 1.0                          # (n, V)
        if lam is not None:
            p_cache = (torch.softmax(s, 0).unsqueeze(1) * one_hot).sum(0)     # (V,)
            p = (1 - lam) * log_p.exp() + lam * p_cache
        else:
            p = logits[t].exp() + (torch.exp(s + alpha).unsqueeze(1) * one_hot).sum(0)
            p = p / p.sum()
        out.append(math.log(p[y[t]]) if p[y[t]] > 0 else -math.inf)
    return torch.tensor(out, dtype=torch.float64)


class Recorded:
    """A model that replays fixed (logits, h) in chunks of the given sizes: the stream protocol."""

    name = "recorded"

    def __init__(self, logits, h, sizes=(T,)):
        self.logits, self.h, self.sizes = logits, h, sizes
        self.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(logits.shape[1] - 1)])

    def stream(self, tokens):
        a, k = 0, 0
        while a < len(tokens):
            n = self.sizes[k % len(self.sizes)]
            yield self.logits[a:a + n], self.h[a:a + n]
            a, k = a + n, k + 1


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(0)
    logits = 2 * torch.randn(T, V, generator=g)
    h = torch.randn(T, H, generator=g) / 2
    y = torch.randint(0, V, (T,), generator=g)
    return logits, h, y


def close(a, b, atol=1e-4):
    a, b = a.double(), b.double()
    assert torch.equal(torch.isfinite(a), torch.isfinite(b)), "the two disagree on which scores are -inf"
    f = torch.isfinite(b)
    return (a[f] - b[f]).abs().max().item() <= atol


SETTINGS = [(1.0, 0.3, 20), (0.0, 0.5, 7), (3.0, 0.9, 1), (0.7, 0.2, 1000), (2.0, 1.0, 50)]


@pytest.mark.parametrize("theta,lam,window", SETTINGS)
def test_linear_matches_the_loop(data, theta, lam, window):
    logits, h, y = data
    ref = reference(logits, h, y, theta, window, lam=lam)
    assert close(linear_cache(log_softmax(logits), h, y, theta, lam, window), ref)
    assert close(NeuralCache(Recorded(logits, h, (5, 1, 33)), theta, lam, window).score(y), ref)


@pytest.mark.parametrize("theta,alpha,window", [(1.0, 0.0, 20), (0.5, -2.0, 3), (2.0, 1.5, 1000), (0.0, 0.7, 1)])
def test_global_matches_the_loop(data, theta, alpha, window):
    logits, h, y = data
    ref = reference(logits, h, y, theta, window, alpha=alpha)
    assert close(global_cache(logits, h, y, theta, alpha, window), ref)
    model = Recorded(logits, h, (17,))
    assert close(NeuralCache(model, theta, window=window, mode="global", alpha=alpha).score(y), ref)


def test_empty_cache_at_the_start_gives_the_model(data):
    logits, h, y = data
    lp = log_softmax(logits)
    assert linear_cache(lp, h, y, 1.0, 0.5, 10)[0] == lp[0, y[0]]
    assert torch.allclose(global_cache(logits, h, y, 1.0, 3.0, 10)[0], lp[0, y[0]])


def test_window_holds_exactly_the_previous_positions():
    # equal states give every stored position the same weight, so p_cache(y_t) is the share of
    # y_t among exactly the `window` previous targets: one too many, one too few, or the current
    # target itself would each change it
    y = torch.tensor([0, 1, 1, 2, 1, 0, 0, 1, 2, 2, 1, 0, 1, 1, 1])
    n, window, lam = len(y), 3, 1.0
    h, lp = torch.ones(n, 4), torch.full((n, 3), -math.log(3))
    expected = [math.log(1 / 3)] + [
        math.log(c / min(t, window)) if (c := int((y[max(0, t - window):t] == y[t]).sum())) else -math.inf
        for t in range(1, n)]
    assert close(linear_cache(lp, h, y, 2.0, lam, window), torch.tensor(expected), atol=1e-6)


def broken_logsums(lag_low, lag_high_extra):
    """The cache sums with a wrong window: ``lag_low=0`` leaks the current target, ``extra=1`` is one too long."""
    def logsums(h_q, y_q, keys, values, window, thetas):
        m = keys.shape[0] - h_q.shape[0]
        lag = m + torch.arange(h_q.shape[0]).unsqueeze(1) - torch.arange(keys.shape[0]).unsqueeze(0)
        valid = (lag >= lag_low) & (lag <= window + lag_high_extra)
        s = (thetas.view(-1, 1, 1) * (h_q @ keys.T)).masked_fill(~valid, -math.inf)
        match = valid & (values.unsqueeze(0) == y_q.unsqueeze(1))
        return torch.logsumexp(s, -1), torch.logsumexp(s.masked_fill(~match, -math.inf), -1)
    return logsums


@pytest.mark.parametrize("broken", [broken_logsums(0, 0), broken_logsums(1, 1), broken_logsums(1, -1)],
                         ids=["leaks-target", "window+1", "window-1"])
def test_a_broken_window_fails_these_checks(monkeypatch, data, broken):
    monkeypatch.setattr(cache_mod, "logsums", broken)
    with pytest.raises(AssertionError):
        test_window_holds_exactly_the_previous_positions()
    with pytest.raises(AssertionError):
        test_linear_matches_the_loop(data, 1.0, 0.3, 20)


def test_history_is_carried_across_chunks_of_any_length(data):
    logits, h, y = data
    whole = NeuralCache(Recorded(logits, h), 1.5, 0.4, 25).score(y)
    for sizes in [(1,), (7, 1, 40), (100,), (24, 25, 26)]:
        pieces = NeuralCache(Recorded(logits, h, sizes), 1.5, 0.4, 25, chunk=9).score(y)
        assert torch.allclose(pieces, whole, atol=1e-5), sizes
    memory, thetas = CacheMemory(25, chunk=4), torch.tensor([1.5])
    parts = [memory.read(h[a:b], y[a:b], thetas) for a, b in [(0, 3), (3, 50), (50, T)]]
    assert memory.keys.shape == (25, H) and memory.seen == T
    l_all, l_match = CacheMemory(25).read(h, y, thetas)
    assert torch.allclose(torch.cat([p[0] for p in parts], 1), l_all, atol=1e-5)
    assert torch.allclose(torch.cat([p[1] for p in parts], 1), l_match, atol=1e-5)
    warm = CacheMemory(25)
    warm.store(h[:50], y[:50])  # remembered, not scored
    la, lm = warm.read(h[50:], y[50:], thetas)
    assert torch.allclose(la, l_all[:, 50:], atol=1e-5) and torch.allclose(lm, l_match[:, 50:], atol=1e-5)


@pytest.fixture(scope="module")
def lstm():
    torch.manual_seed(0)
    vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(29)])
    model = RNNLM(LMConfig(30, emb_size=16, hidden_size=24, num_layers=2, tie=True, init_range=0.5))
    model.vocab = vocab
    return model, torch.randint(0, 30, (3, 90), generator=torch.Generator().manual_seed(1))


def test_lam_zero_gives_exactly_the_model(lstm):
    model, rows = lstm
    assert torch.equal(NeuralCache(model, theta=2.0, lam=0.0, window=10).score(rows[0]), model.score(rows[0]))
    cache = NeuralCache(model, theta=2.0, lam=0.0, window=10)
    s, m = cache.start(3), model.start(3)
    for x in rows.T[:20]:
        assert torch.equal(cache.next_log_probs(s), model.next_log_probs(m))
        s, m = cache.advance(s, x), model.advance(m, x)


@pytest.mark.parametrize("kw", [dict(lam=0.3), dict(mode="global", alpha=1.0), dict(lam=0.5, pointer_compat=True)])
def test_step_interface_equals_score_and_sums_to_one(lstm, kw):
    model, rows = lstm
    cache = NeuralCache(model, theta=1.5, window=12, **kw)
    state, got = cache.start(3), []
    for x in rows.T:
        logp = cache.next_log_probs(state)                                   # (3, V)
        assert torch.allclose(logp.exp().sum(1), torch.ones(3), atol=1e-5)
        got.append(logp.gather(1, x.view(-1, 1)).squeeze(1))
        state = cache.advance(state, x)
    got = torch.stack(got, 1)                                                # (3, 90)
    for r in range(3):
        assert close(got[r], cache.score(rows[r]))
    assert not close(got[0], model.score(rows[0])), "the cache changed nothing: the test would not see a bug"


def test_reorder_keeps_each_rows_cache(lstm):
    model, rows = lstm
    cache = NeuralCache(model, theta=1.5, lam=0.4, window=8)
    state = cache.start(3)
    for x in rows.T[:30]:
        state = cache.advance(state, x)
    swapped = cache.reorder(state, torch.tensor([2, 0]))
    assert torch.equal(swapped.log_probs, state.log_probs[[2, 0]])
    a, b = cache.advance(swapped, rows[[2, 0], 30]), cache.advance(state, rows[:, 30])
    assert torch.allclose(a.log_probs, b.log_probs[[2, 0]], atol=1e-6)


def test_global_normalisation_sums_to_one_over_the_vocabulary(data):
    logits, h, y = data
    last = []
    for w in range(V):  # the last position's score for every possible target
        y_w = y.clone()
        y_w[-1] = w
        last.append(global_cache(logits, h, y_w, 1.2, 0.5, 30)[-1])
    assert abs(torch.logsumexp(torch.stack(last).double(), 0).item()) < 1e-5


def test_pointer_compat_skips_the_first_window_positions(data):
    logits, h, y = data
    plain = NeuralCache(Recorded(logits, h), 1.0, 0.3, 20).score(y)
    compat = NeuralCache(Recorded(logits, h), 1.0, 0.3, 20, pointer_compat=True).score(y)
    model = log_softmax(logits).double().gather(1, y.view(-1, 1)).squeeze(1)
    assert torch.allclose(compat[:21], model[:21]) and torch.equal(compat[21:], plain[21:])
    assert not torch.allclose(plain[:21], model[:21])
    assert close(compat, reference(logits, h, y, 1.0, 20, lam=0.3, skip_first=True))


def test_tuning_reuses_states_and_agrees_with_the_wrapper(lstm):
    model, rows = lstm
    tokens = rows.reshape(-1)
    inputs = collect(model, tokens, progress=False)
    assert abs(inputs.ppl() - math.exp(-model.score(tokens).mean().item())) < 1e-3
    grid = grid_search(inputs, [0.0, 1.0, 2.5], lams=[0.0, 0.2, 0.6], window=15, progress=False)
    for i, theta in enumerate(grid.thetas):
        for j, lam in enumerate(grid.weights):
            want = math.exp(-NeuralCache(model, theta, lam, 15).score(tokens).mean().item())
            assert abs(grid.ppl[i, j].item() - want) < 1e-3 * want
    assert grid.best[2] == grid.ppl.min().item()
    shared = grid_search(inputs, grid.thetas, lams=grid.weights, window=15, progress=False,
                         sums=cache_sums(inputs, grid.thetas, 15, progress=False))
    assert torch.equal(shared.ppl, grid.ppl)
    with pytest.raises(ValueError, match="compute them with cache_sums"):
        grid_search(inputs, [1.0], lams=[0.1], window=15, sums=cache_sums(inputs, [1.0, 2.0], 15, progress=False))
    glob = grid_search(inputs, [0.5, 2.0], alphas=[-1.0, 2.0], window=15, mode="global", progress=False)
    want = math.exp(-NeuralCache(model, 2.0, window=15, mode="global", alpha=-1.0).score(tokens).mean().item())
    assert abs(glob.ppl[1, 0].item() - want) < 1e-3 * want
    sweep = window_sweep(inputs, [1, 15, 400], 1.0, lam=0.2, progress=False)
    assert abs(sweep[1] - grid.ppl[1, 1].item()) < 1e-6 * sweep[1]
    per_token = cache_scores(inputs, 1.0, 15, lam=0.2, pointer_compat=True, progress=False)
    assert close(per_token, NeuralCache(model, 1.0, 0.2, 15, pointer_compat=True).score(tokens))
    setting = grid.setting  # the chosen (theta, lam) as the lessons store it, and its scores on any text
    assert (setting["theta"], setting["lam"], setting["ppl"]) == grid.best and setting["window"] == 15
    assert close(cached(inputs, setting), NeuralCache(model, setting["theta"], setting["lam"], 15).score(tokens))
    with pytest.raises(ValueError, match="read .best"):
        glob.setting


def test_attention_weights(data):
    _, h, _ = data
    i, a = attention(h, 50, 1.3, 20)
    assert torch.equal(i, torch.arange(30, 50)) and abs(a.sum().item() - 1) < 1e-6
    assert torch.allclose(a, torch.softmax(1.3 * h[30:50] @ h[50], 0))
    assert attention(h, 0, 1.0, 5)[0].numel() == 0


@pytest.mark.parametrize("call,message", [
    (lambda d: linear_cache(log_softmax(d[0]), d[1], d[2], -0.1, 0.1, 5), "theta=-0.1 is negative"),
    (lambda d: linear_cache(log_softmax(d[0]), d[1], d[2], 1.0, 1.5, 5), "lam=1.5 is not a mixing weight"),
    (lambda d: linear_cache(log_softmax(d[0]), d[1], d[2], 1.0, -0.2, 5), "lam=-0.2 is not a mixing weight"),
    (lambda d: linear_cache(log_softmax(d[0]), d[1], d[2], 1.0, 0.1, 0), "window=0 is not a size"),
    (lambda d: linear_cache(log_softmax(d[0]), d[1], d[2], 1.0, 0.1, 2.5), "window=2.5 is not a size"),
    (lambda d: linear_cache(log_softmax(d[0]), d[1][:-1], d[2], 1.0, 0.1, 5), "one row per position"),
    (lambda d: linear_cache(log_softmax(d[0]), d[1], d[2][None], 1.0, 0.1, 5), "targets must be (T,)"),
    (lambda d: linear_cache(log_softmax(d[0])[0], d[1], d[2], 1.0, 0.1, 5), "must be (T, V)"),
    (lambda d: global_cache(d[0], d[1], d[2] + V, 1.0, 0.0, 5), "outside 0..11"),
    (lambda d: global_cache(d[0], d[1], d[2], 1.0, math.nan, 5), "alpha must be a finite number"),
    (lambda d: NeuralCache(Recorded(d[0], d[1]), mode="softmax"), "mode='softmax' is unknown"),
    (lambda d: NeuralCache(object()), "NeuralCache wraps a model with a stream(tokens) method"),
])
def test_bad_settings_get_one_sentence(data, call, message):
    with pytest.raises((ValueError, TypeError)) as err:
        call(data)
    text = str(err.value)
    assert message in text and text.endswith(".") and "\n" not in text


@pytest.mark.cuda
def test_cuda_gives_the_cpu_numbers(lstm):
    model, rows = lstm
    cpu = NeuralCache(model, 1.5, 0.3, 12).score(rows[0])
    gpu_model = RNNLM(model.config).cuda()
    gpu_model.load_state_dict(model.state_dict())
    gpu_model.vocab = model.vocab
    for kw in (dict(lam=0.3), dict(mode="global", alpha=0.5)):
        cache = NeuralCache(gpu_model, 1.5, window=12, **kw)
        assert close(cache.score(rows[0]), NeuralCache(model, 1.5, window=12, **kw).score(rows[0]))
        state = cache.start(2)
        state = cache.advance(state, rows[:2, 0].cuda())
        assert state.log_probs.is_cuda
    assert close(NeuralCache(gpu_model, 1.5, 0.3, 12).score(rows[0]), cpu)
    inputs = collect(gpu_model, rows[0], progress=False)
    assert inputs.hidden.is_cuda
    assert close(cache_scores(inputs, 1.5, 12, lam=0.3, progress=False), cpu)


def test_explorer_agrees_with_the_cache_and_redraws(lstm):
    from lmcourse.widgets.cache_explorer import CacheExplorer

    model, rows = lstm
    tokens = rows.reshape(-1)
    inputs = collect(model, tokens, progress=False)
    explorer = CacheExplorer(inputs, model.vocab, theta=1.5, lam=0.4, window=12, context=20)
    mixed = NeuralCache(model, 1.5, 0.4, 12).score(tokens)
    for t in (0, 1, 13, 200):
        v = explorer.view(t)
        assert abs(math.log(v.p_mixed) - mixed[t].item()) < 1e-4
        assert len(v.positions) == min(t, 12) and (len(v.positions) == 0 or abs(v.weights.sum().item() - 1) < 1e-6)
    helps, hurts = explorer.extremes(5)
    gains = mixed - inputs.log_p.double()
    assert gains[helps[0]] == gains.max() and gains[hurts[0]] == gains.min()
    page = explorer.html(helps[0])
    assert explorer.view(helps[0]).target in page and page.count("<span title=") == 20
    shown = explorer.widget(t=50)
    c = explorer.controls
    assert shown._repr_mimebundle_()["text/html"] == c["out"].value  # the static copy is the first view
    before = c["out"].value
    c["t"].value = 60
    assert c["out"].value != before and "position 60" in c["out"].value
    c["forward"].click()
    assert c["t"].value == 61 and "position 61" in c["out"].value     # one position at a time
    c["back"].click(), c["back"].click()
    assert c["t"].value == 59
    c["helps"].click()  # "cache helps most"
    assert c["t"].value == helps[0]
    marks = explorer.interesting(50)
    c["t"].value = 1
    c["next"].click()
    assert c["t"].value == min(p for p in marks if p > 1)
    c["next"].click()
    assert c["t"].value == min(p for p in marks if p > min(p for p in marks if p > 1))
    c["previous"].click()
    assert c["t"].value == min(p for p in marks if p > 1)


def test_explorer_shading_marks_and_openings():
    from lmcourse.vocab import Vocab
    from lmcourse.widgets.cache_explorer import CacheExplorer

    words = "<eos> <doc> the a name bob".split()
    vocab = Vocab(words)
    text = "<doc> <eos> the bob a the bob a the <doc> <eos> bob a the bob".split()
    targets = torch.tensor([vocab.stoi[w] for w in text])
    T, H = len(text), 4
    hidden = torch.zeros(T, H)
    hidden[2, 0] = hidden[14, 0] = 3.0                       # position 14 looks hardest at 2, outside the view,
    hidden[12, 0] = 1.0                                      # and among the words shown, at 12
    log_p = torch.full((T,), math.log(0.05))
    inputs = CacheInputs(targets, hidden, log_p, log_p.clone(), torch.zeros(T))
    explorer = CacheExplorer(inputs, vocab, theta=0.5, lam=0.3, window=100, context=6, opening=2)
    assert explorer.openings().tolist() == [i in (0, 1, 2, 9, 10, 11) for i in range(T)]
    _, hurts = explorer.extremes(T)
    assert hurts and not set(hurts) & {0, 1, 2, 9, 10, 11}
    t = 14                                                  # target "bob", seen at 3, 6 and 11
    page = explorer.html(t)
    shades = [float(x) for x in re.findall(r"rgba\(230, 120, 0, ([\d.]+)\)", page)]
    v = explorer.view(t)
    assert int(v.positions[v.weights.argmax()]) == 2         # the strongest weight lies outside the view ...
    assert len(shades) == 7 and shades[4] == 1.0 and max(shades[:6]) == 1.0  # ... yet 12 is drawn full colour
    assert all(0 < a < 1 for k, a in enumerate(shades[:6]) if k != 4)
    assert page.count(f"border-bottom: 3px solid") - 1 == 1  # one earlier "bob" among the 6 words shown, + the key
    assert page.count("<caption") == 2 and "strongest attention" in page
