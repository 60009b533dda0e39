"""lmcourse.adapt.dyneval: each way dynamic evaluation can give a wrong number is told by its cause."""
import math
import re
import warnings

import pytest
import torch

from lmcourse.adapt.dyneval import DynamicEval, gradient_stats
from lmcourse.lm import perplexity
from lmcourse.networks.models import LMConfig, RNNLM
from lmcourse.vocab import Vocab

from .helpers import assert_one_sentence, WORDS

V = 20


def tiny_model(dtype=torch.float64) -> RNNLM:
    torch.manual_seed(0)
    model = RNNLM(LMConfig(V, emb_size=6, hidden_size=8, num_layers=1)).to(dtype).eval()
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


def stream(n=200):
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def stats(model):
    return gradient_stats(model, stream(400), batch_size=4, progress=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
@pytest.mark.parametrize("where", [0, -1])
def test_statistics_that_are_not_finite_are_refused_and_not_blamed_on_lr(model, stats, bad, where):
    names = list(stats)
    damaged = dict(stats)
    name = names[where]
    damaged[name] = stats[name].clone()
    damaged[name].view(-1)[0] = bad
    with pytest.raises(ValueError) as err:
        DynamicEval(model, "rms", lr=1e-3, stats=damaged)
    assert_one_sentence(str(err.value), rf"stats\['{name}'\] holds NaN, an infinity or a negative number.*"
                                        r"recompute them with gradient_stats")
    assert "lower the learning rate" not in str(err.value)


@pytest.mark.parametrize("eps", [1e-45, 1e-300])
def test_a_step_scale_that_overflows_is_refused_with_its_limit(eps):
    model = tiny_model(torch.float32)
    zero = {n: torch.zeros_like(p) for n, p in model.named_parameters()}  # MS = 0: the step is lr / eps
    run = DynamicEval(model, "rms", lr=1.0, eps=eps, stats=zero)
    with pytest.raises(ValueError) as err:
        run.score(stream(20))
    assert_one_sentence(str(err.value), r"The step scale lr / \(MS \+ eps\) of .* overflows torch\.float32 .*"
                                        r"raise eps above [0-9.e+-]+ or lower lr")


@pytest.mark.parametrize("method, lr", [("sgd", 100.0), ("sgd", 50.0), ("rms", 100.0), ("rms", 1.0)])
def test_a_rate_that_wrecks_the_weights_warns_whatever_the_number_it_gives(model, stats, method, lr):
    with pytest.warns(RuntimeWarning) as caught:
        ppl = perplexity(DynamicEval(model, method, lr=lr, stats=stats), stream())
    assert ppl > V  # worse than a uniform guess, or infinite
    message = str(caught[0].message)
    assert_one_sentence(message, rf"Dynamic evaluation diverged: .*lower the learning rate \(lr={lr:g}\)")


@pytest.mark.parametrize("method", ["sgd", "rms"])
def test_a_useful_rate_gives_no_warning(model, stats, method):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ppl = perplexity(DynamicEval(model, method, lr=1e-4, stats=stats), stream())
    assert math.isfinite(ppl) and ppl < 2 * V


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_trained_weights_that_are_not_finite_are_blamed_not_lr(stats, bad):
    model = tiny_model()
    with torch.no_grad():
        model.embedding.weight[3, 0] = bad
    with pytest.warns(RuntimeWarning) as caught:
        DynamicEval(model, "sgd", lr=1e-4).score(stream())
    message = str(caught[0].message)
    assert_one_sentence(message, r"trained weights hold NaN or an infinity, whatever the learning rate")
    assert "lower the learning rate" not in message


# ------------------------------------------------------------------- dynamic evaluation's settings


@pytest.mark.parametrize("method", ["sgd", "rms"])
@pytest.mark.parametrize("eps", [math.nan, math.inf, 0.0, -1e-5])
def test_dynamic_evaluation_checks_eps_whatever_the_method(method, eps):
    model = tiny_model()
    stats = {n: torch.ones_like(p) for n, p in model.named_parameters()}
    with pytest.raises(ValueError) as err:
        DynamicEval(model, method, lr=0.1, eps=eps, stats=stats)
    assert_one_sentence(str(err.value), r"eps must be a finite number|eps=.* is outside \(0, inf\)")


@pytest.mark.parametrize("lr", [1e30, 101.0])
def test_dynamic_evaluation_refuses_a_rate_that_can_only_wreck_the_weights(lr):
    with pytest.raises(ValueError) as err:
        DynamicEval(tiny_model(), "sgd", lr=lr)
    assert_one_sentence(str(err.value), re.escape(f"lr={lr:g}") + r" is outside \[0, 100\]: a step moves each weight "
                                                                  r"by about lr times its \(scaled\) gradient")


def test_dynamic_evaluation_that_diverges_gives_infinity_and_says_why(monkeypatch):
    from lmcourse.adapt import dyneval

    def diverge(theta, g, step):  # as a step far too large would: the weights overflow
        theta.fill_(math.nan)
    monkeypatch.setattr(dyneval, "update_", diverge)
    with pytest.warns(RuntimeWarning) as caught:
        ppl = perplexity(DynamicEval(tiny_model().eval(), "sgd", lr=50.0), torch.arange(40) % len(WORDS))
    assert ppl == math.inf
    assert_one_sentence(str(caught[0].message), r"Dynamic evaluation diverged: from token 5 on the adapted weights "
                                                r"give no finite log-probabilities; lower the learning rate \(lr=50\)")
