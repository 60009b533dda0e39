"""Lesson 09's ladder: each rung is the rung below plus its idea, the declared runs are the lesson's,
and the wrappers' tuning picks what it measures best."""
import math

import pytest
import torch

from lmcourse.adapt.cache_tuning import CacheInputs, grid_search
from lmcourse.course import registry
from lmcourse.course.runs import course_model, lesson09 as ladder


@pytest.mark.parametrize("scale", ["ci", "cpu", "gpu"])
def test_each_rung_adds_one_idea_to_the_rung_below(scale):
    shared = ladder.shared_settings(scale)
    s = {r: ladder.rung_settings(r, 0, shared) for r in ladder.TRAINED}
    drop = {k for k in ladder.AWD_PTB_DROPOUTS}
    assert s["LSTM"]["model"] == {"tie": False} and s["LSTM"]["train"] == {}
    assert set(s["+ dropouts"]["model"]) - set(s["LSTM"]["model"]) == drop
    assert all(s["+ dropouts"]["model"][k] == pytest.approx(p * shared["dropout_scale"])
               for k, p in ladder.AWD_PTB_DROPOUTS.items())
    assert {k: v for k, v in s["+ tying"]["model"].items() if s["+ dropouts"]["model"].get(k) != v} == {"tie": True}
    assert s["AWD recipe"]["model"] == s["+ tying"]["model"] and s["+ tying"]["train"] == {}
    assert s["AWD recipe"]["train"]["optimizer"] == "ntasgd" and s["AWD recipe"]["train"]["variable_bptt"]
    added = {k: v for k, v in s["MoS"]["model"].items() if s["AWD recipe"]["model"].get(k) != v}
    assert added["head"] == "mos" and set(added) == {"head", "n_experts", "dropoutl", "mos_latent"}
    assert s["MoS"]["train"] == s["AWD recipe"]["train"]
    # nothing else differs: sizes, epochs, data, seed
    rest = lambda d: {k: v for k, v in d.items() if k not in ("rung", "model", "train")}  # noqa: E731
    assert all(rest(s[r]) == rest(s["LSTM"]) for r in ladder.TRAINED)


@pytest.mark.parametrize("changes", [{}, dict(d=4, emb_size=8, hidden_size=8, warmup=3),
                                     dict(d=8, emb_size=8, hidden_size=16)])
def test_tying_removes_the_output_vectors_and_nothing_else(changes):
    shared = ladder.shared_settings("ci", **changes)
    untied, tied = (ladder.model_config(ladder.rung_settings(r, 0, shared), 30) for r in ("+ dropouts", "+ tying"))
    differs = {k for k, v in untied.as_dict().items() if tied.as_dict()[k] != v}
    assert differs <= {"tie", "vector_size"} and tied.tie and not untied.tie
    from lmcourse.networks.models import RNNLM
    assert RNNLM(untied).num_parameters() - RNNLM(tied).num_parameters() == 30 * shared["emb_size"]
    train = ladder.train_config(ladder.rung_settings("LSTM", 0, shared))
    assert train.warmup == shared.get("warmup", 0)


@pytest.mark.parametrize("scale", ["ci", "cpu", "gpu"])
def test_the_settings_speak_the_config_classes_vocabulary(scale):
    """Every setting is a config field, the corpus's Params, or one of the lesson's own knobs; the mixture's and
    the AWD recipe's shared fields reach only their rungs' configs."""
    from dataclasses import asdict

    from lmcourse.training.settings import split
    from lmcourse.training.trainconfig import TrainConfig
    shared = ladder.shared_settings(scale)
    _, _, rest = split(shared)
    assert set(rest) == {"d", "dropout_scale", "corpus"}
    assert {"emb_size", "hidden_size", "batch_size", "n_experts", "mos_latent"} <= set(shared)
    lstm, mos = (ladder.rung_settings(r, 0, shared) for r in ("LSTM", "MoS"))
    first, last = ladder.model_config(lstm, 30), ladder.model_config(mos, 30)
    assert (first.n_experts, first.dropoutl, first.head) == (1, 0.0, "softmax")
    assert (last.n_experts, last.dropoutl, last.mos_latent) == (shared["n_experts"], shared["dropoutl"],
                                                                shared["mos_latent"])
    assert ladder.train_config(lstm).nonmono == TrainConfig(epochs=1).nonmono
    assert ladder.train_config(mos).nonmono == shared["nonmono"]
    t = asdict(ladder.train_config(lstm))
    assert all(t[k] == shared[k] for k in ("epochs", "lr", "batch_size", "bptt", "clip", "warmup"))
    assert (first.emb_size, first.hidden_size) == (shared["emb_size"], shared["hidden_size"])


def test_an_unknown_rung_is_refused_in_one_sentence():
    with pytest.raises(ValueError, match="not a trained rung.*pick one of LSTM"):
        ladder.rung_settings("+ cache", 0, ladder.shared_settings("ci"))


def test_changes_reach_the_corpus_or_the_shared_settings():
    shared = ladder.shared_settings("cpu", n_names=123, epochs=7)
    assert shared["corpus"]["n_names"] == 123 and shared["epochs"] == 7
    assert "n_names" not in shared


def test_the_declared_runs_are_the_lessons_settings():
    for scale in ("ci", "cpu"):
        declared = registry.settings(course_model.NAME, scale)
        shared = ladder.shared_settings(scale)
        assert len(declared) == len(ladder.TRAINED) * len(ladder.SEEDS)
        assert declared[0] == ladder.rung_settings(ladder.TRAINED[0], ladder.SEEDS[0], shared)
        wrappers = registry.settings("09-wrappers", scale)
        assert [w["seed"] for w in wrappers] == list(ladder.SEEDS)
        assert all(w["rung"] == "MoS" and "wrappers" in w for w in wrappers)


def test_the_variant_corpus_is_fingerprinted_from_its_params(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    corpus = ladder.shared_settings("ci")["corpus"]
    from lmcourse.corpora.grammar import Params
    from lmcourse.store.stored_runs import corpus_fingerprint
    expected = corpus_fingerprint(ladder.ladder_corpus(Params(**corpus)).vocab)
    assert registry._fingerprint(corpus) == expected
    assert registry._fingerprint(dict(corpus, n_names=corpus["n_names"] + 1)) != expected


def _inputs(T=60, H=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    targets = torch.randint(0, 5, (T,), generator=g)
    hidden = torch.randn(T, H, generator=g, dtype=torch.float64)
    logits = torch.randn(T, 5, generator=g, dtype=torch.float64)
    log_z = torch.logsumexp(logits, 1)
    z = logits.gather(1, targets.view(-1, 1)).squeeze(1)
    return CacheInputs(targets, hidden, z - log_z, z, log_z)


def test_the_best_cache_is_the_lowest_of_the_grid_and_scores_as_it_says():
    inputs = _inputs()
    best = ladder.best_cache(inputs)
    g = ladder.CACHE_GRID
    grid = grid_search(inputs, g["thetas"], lams=g["lams"], window=g["window"])
    assert best["ppl"] == pytest.approx(float(grid.ppl.min()))
    assert (best["theta"], best["lam"]) == grid.best[:2]
    again = math.exp(-float(ladder.cached(inputs, best).mean()))
    assert again == pytest.approx(best["ppl"], rel=1e-9)


def test_interior_means_strictly_inside_every_tuned_grid():
    assert ladder.interior([1, 2], [[0, 1, 2], [0, 1, 2, 3]])
    assert not ladder.interior([0, 1], [[0, 1, 2], [0, 1, 2]])       # the first value of a grid: its edge
    assert not ladder.interior([1, 2], [[0, 1, 2], [0, 1, 2]])       # the last value
    assert ladder.interior([0], [[5]])                                # a grid of one value is fixed, not tuned


def test_a_diverged_stream_has_infinite_perplexity_not_an_error():
    inputs = _inputs()
    inputs.log_p[:] = -1e6
    assert inputs.ppl() == math.inf
    assert ladder._ppl(inputs.log_p) == math.inf


def test_the_ladder_runs_end_to_end_at_ci(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    torch.set_num_threads(1)
    out = ladder.run_ladder(0, scale="ci")
    assert list(out["ladder"]) == list(ladder.RUNGS)
    assert all(math.isfinite(out["ladder"][r]["valid"]) for r in ladder.RUNGS)
    assert out["floor"]["test"] < out["ladder"]["KN5"]["test"]
    assert set(out["notes"]) == {"+ cache", "+ dynamic evaluation"}
    # nested: dynamic evaluation stands on the cache, whose setting it keeps
    assert out["notes"]["+ dynamic evaluation"]["cache"] == {k: v for k, v in out["notes"]["+ cache"].items() if k != "at"}


def test_the_course_models_regime_is_worded_once_from_its_settings():
    from types import SimpleNamespace

    from lmcourse.course.runs import lesson03

    shared = course_model.shared_settings("cpu")
    text = course_model.regime(shared)
    assert text == "course model: 40,000 training tokens, 1 x 64, E = 64, d = 16, 40 epochs"
    corpus = SimpleNamespace(train=torch.zeros(40_011, dtype=torch.long))   # the tokens the corpus really has
    assert course_model.regime(shared, corpus).startswith("course model: 40,011 training tokens, 1 x 64,")
    wide = lesson03.lesson_shared("cpu")                        # lesson 03's branch: its own E and H = WIDTH x E
    assert f"1 x {wide['hidden_size']}, E = {wide['emb_size']}, d = 16, {wide['epochs']} epochs" in course_model.regime(wide)
    assert (wide["hidden_size"], wide["emb_size"]) != (64, 64)
    changed = course_model.regime(course_model.shared_settings("cpu", n_names=300, epochs=20))
    assert "20 epochs" in changed and changed.endswith("; corpus variant with n_names 300")
    with pytest.raises(ValueError, match="lack corpus"):
        course_model.regime({k: v for k, v in shared.items() if k != "corpus"})
