"""Lesson 08's passes over a tiny model: each stored number is what its definition says."""
import json
import math
from types import SimpleNamespace

import pytest
import torch

from lmcourse.adapt.dyneval import DynamicEval, gradient_stats
from lmcourse.course.runs import lesson08
from lmcourse.lm import perplexity_from_nll
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.vocab import Vocab

V = 17


def tiny_model(seed=0) -> RNNLM:
    torch.manual_seed(seed)
    model = RNNLM(LMConfig(V, emb_size=6, hidden_size=8, num_layers=1, tie=True)).double().eval()
    model.vocab = Vocab(["<eos>", "<doc>"] + [f"w{i}" for i in range(V - 2)])
    return model


def stream(n, seed, doc_every=None):
    g = torch.Generator().manual_seed(seed)
    out = torch.randint(2, V, (n,), generator=g)
    if doc_every:
        out[::doc_every] = 1  # a <doc> opens every piece of doc_every tokens
    return out


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def test_doc_pieces_cover_the_stream_and_start_at_each_doc():
    tokens = torch.tensor([5, 6, 1, 7, 8, 9, 1, 4])
    pieces = lesson08.doc_pieces(tokens, 1)
    assert pieces == [(0, 2), (2, 6), (6, 8)]
    assert lesson08.doc_pieces(torch.tensor([1, 3, 3]), 1) == [(0, 3)]  # a stream that opens with <doc>
    assert lesson08.doc_pieces(torch.tensor([3, 3]), 1) == [(0, 2)]     # no document marked: one piece


def test_half_pieces_cut_every_document_at_its_middle_and_cover_the_stream():
    tokens = torch.tensor([5, 6, 1, 7, 8, 9, 1, 4, 4])
    halves = lesson08.half_pieces(tokens, 1)
    assert halves == [(0, 1), (1, 2), (2, 4), (4, 6), (6, 7), (7, 9)]  # pieces (0, 2), (2, 6), (6, 9)
    assert [a for a, _ in halves[1:]] == [b for _, b in halves[:-1]] and halves[-1][1] == len(tokens)


def test_halves_score_each_half_on_its_own_from_theta_0(model):
    grid = dict(rule=dict(lesson08.RULE, lrs=[1e-3], decays=[0.0]))
    corpus = SimpleNamespace(train=stream(400, 1, 50), test=stream(90, 3, 30), vocab=model.vocab)
    summary = dict(grids=dict(rms=dict(lr=1e-3, decay=0.0)))
    out = lesson08.halves(model, corpus, summary, grid, progress=False)
    test = corpus.test
    stats = gradient_stats(model, corpus.train, batch_size=lesson08.STATS_BATCH, bptt=lesson08.RULE["bptt"])
    chosen = DynamicEval(model, "rms", lr=1e-3, decay=0.0, eps=grid["rule"]["eps"], bptt=grid["rule"]["bptt"],
                         stats=stats)
    for a, b in lesson08.half_pieces(test, 1):                            # (0, 15), (15, 30), (30, 45), ...
        assert torch.allclose(out["dynamic"][a:b].double(), chosen.score(test[a:b]), atol=1e-5)
        assert torch.allclose(out["static"][a:b].double(), model.score(test[a:b]), atol=1e-6)
    carried = chosen.score(test[30:60])                                   # one document, its weights carried
    assert not torch.allclose(out["dynamic"][45:60].double(), carried[15:], atol=1e-6), "the middle resets"
    assert set(lesson08.RUNS) == {lesson08.NAME, lesson08.HALVES, lesson08.CACHED}
    assert lesson08.halves_settings(0, "ci") == dict(lesson08.pass_settings(0, "ci"), cut="document halves")


def test_with_weights_copies_and_leaves_the_model_alone(model):
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    shifted = {n: p + 0.5 for n, p in before.items()}
    copy = lesson08.with_weights(model, shifted)
    assert all(torch.equal(p, shifted[n]) for n, p in copy.named_parameters())
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
    assert not copy.training


def test_tune_takes_the_lowest_perplexity_and_survives_a_diverged_rate(model):
    grid = dict(lesson08.SGD_GRID, lrs=[0.0, 0.05, 90.0], decays=[0.0, 0.5])
    tokens = stream(120, 3)
    out = lesson08.tune(model, tokens, grid, progress=False)
    ppl = torch.tensor(out["ppl"], dtype=torch.float64).nan_to_num(nan=math.inf, posinf=math.inf)
    assert ppl.shape == (3, 2) and out["best"] == float(ppl.min())
    i, j = grid["lrs"].index(out["lr"]), grid["decays"].index(out["decay"])
    assert float(ppl[i, j]) == out["best"] and out["lr"] != 90.0  # the diverged rate is never the best
    static = perplexity_from_nll(-float(model.score(tokens).mean()))
    assert out["ppl"][0][0] == pytest.approx(static, rel=1e-9)  # rate 0: the static model


def test_passes_store_what_each_definition_says(model):
    grid = dict(rule=dict(lesson08.RULE, lrs=[1e-4, 1e-3], decays=[0.0, 1e-2]),
                sgd=dict(lesson08.SGD_GRID, lrs=[0.01, 0.1], decays=[0.0]), segments=[5, 10])
    corpus = SimpleNamespace(train=stream(400, 1, 50), valid=stream(100, 2, 40), test=stream(90, 3, 30),
                             vocab=model.vocab)
    out = lesson08.passes(model, corpus, grid, progress=False)
    summary = json.loads(out["json"])
    test = corpus.test
    assert torch.allclose(out["static"].double(), model.score(test), atol=1e-6)
    b = summary["grids"]["rms"]
    stats = gradient_stats(model, corpus.train, batch_size=lesson08.STATS_BATCH, bptt=lesson08.RULE["bptt"])
    chosen = DynamicEval(model, "rms", lr=b["lr"], decay=b["decay"], eps=grid["rule"]["eps"],
                         bptt=grid["rule"]["bptt"], stats=stats)
    assert torch.allclose(out["rms"].double(), chosen.score(test), atol=1e-5)
    # the reset pass: each document scored on its own, from theta_0
    assert torch.allclose(out["reset"][30:60].double(), chosen.score(test[30:60]), atol=1e-5)
    assert not torch.allclose(out["reset"].double(), out["rms"].double(), atol=1e-6)
    # the control: as many steps as the test stream has segments, on training text, then a static score
    assert summary["control_steps"] == math.ceil(len(test) / grid["rule"]["bptt"])
    frozen = lesson08.with_weights(model, chosen.adapt(corpus.train[:summary["control_steps"] * 5]))
    assert summary["control"]["train"] == pytest.approx(perplexity_from_nll(-float(frozen.score(test).mean())),
                                                        rel=1e-6)
    assert set(summary["segments"]) == {"5", "10"}
    assert summary["segments"]["5"] == pytest.approx(b["best"], rel=1e-9)  # the tuned setting at the tuned length
    assert len(out["drift"]) == len(test) // (20 * grid["rule"]["bptt"])


def test_the_ci_grids_are_the_first_rates_of_the_one_rule():
    ci, cpu = lesson08.grids("ci"), lesson08.grids("cpu")
    assert cpu == dict(rule=lesson08.RULE, sgd=lesson08.SGD_GRID, segments=lesson08.SEGMENTS) == lesson08.grids("gpu")
    for k in ("rule", "sgd"):
        assert ci[k]["lrs"] == cpu[k]["lrs"][:2] and {**ci[k], "lrs": cpu[k]["lrs"]} == cpu[k]
