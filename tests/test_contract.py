"""The neural-model contract of lmcourse.lm: models that are not an RNNLM (a GRU language model
written here, lesson 10's Transformer, and the fixed-window MLP of lmcourse/networks/window.py, whose state is
token ids) train, checkpoint, resume bit for bit, are scored under the neural cache and dynamic evaluation, and
generate text, with nothing in training/ or adapt/ knowing their class. The window MLP, which no module but its
own names, also goes through the command line (train --kind, --resume, evaluate --cache --dyneval from its run
directory) and a lesson's stored run, built from its kind alone."""
import copy
import json
import math
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import pytest
import torch
import torch.nn as nn

from lmcourse import lm
from lmcourse.adapt.cache import NeuralCache
from lmcourse.adapt.dyneval import DynamicEval, gradient_stats
from lmcourse.cli.main import main
from lmcourse.corpora.data import load_corpus
from lmcourse.errors import CheckpointError
from lmcourse.lm import MAX_LOG, check_neural, perplexity_from_nll, register_model
from lmcourse.networks import generate
from lmcourse.networks.base import NeuralLM
from lmcourse.networks.transformer import TransformerConfig, TransformerLM
from lmcourse.store.stored_runs import train_or_load
from lmcourse.training.checkpoint import load_checkpoint, save_checkpoint
from lmcourse.training.rundir import RunDir
from lmcourse.training.settings import Adapter
from lmcourse.training.trainer import TrainConfig, Trainer, load_run_config
from lmcourse.vocab import Vocab

V = 12
PACKAGE = Path(lm.__file__).parent


@dataclass
class GRUConfig:
    vocab_size: int
    emb_size: int = 8
    hidden_size: int = 16

    def as_dict(self) -> dict:
        return asdict(self)


class GRUOutput(NamedTuple):
    logits: torch.Tensor  # (T, B, V)
    h: torch.Tensor  # (T, B, H)
    state: torch.Tensor  # (1, B, H)


class GRULM(NeuralLM):
    """Embedding, one torch GRU layer, a linear decoder: the smallest model that keeps the contract."""

    kind = "test-gru"

    def __init__(self, config: GRUConfig):
        super().__init__()
        self.config, self.vocab = config, None
        self.embedding = nn.Embedding(config.vocab_size, config.emb_size)
        self.rnn = nn.GRU(config.emb_size, config.hidden_size)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, x, state=None) -> GRUOutput:
        state = self.init_state(x.shape[1]) if state is None else state
        h, state = self.rnn(self.embedding(x), state)  # (T, B, H), (1, B, H)
        return GRUOutput(self.decoder(h), h, state)

    def init_state(self, batch_size: int) -> torch.Tensor:
        return self.embedding.weight.new_zeros(1, batch_size, self.config.hidden_size)

    def detach_state(self, state: torch.Tensor) -> torch.Tensor:
        return state.detach()


register_model(GRULM.kind, lambda settings: GRULM(GRUConfig(**settings)))


def periodic(n, seed=0):
    """A random cycle of 5 tokens, one token in ten resampled."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randperm(V, generator=g)[:5].repeat(n // 5 + 1)[:n].clone()
    noise = torch.rand(n, generator=g) < 0.1
    x[noise] = torch.randint(0, V, (int(noise.sum()),), generator=g)
    return x


TRAIN, VALID = periodic(1500), periodic(300)


def gru(seed=0) -> GRULM:
    torch.manual_seed(seed)
    model = GRULM(GRUConfig(V))
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


def transformer(seed=0) -> TransformerLM:
    torch.manual_seed(seed)
    model = TransformerLM(TransformerConfig(V, emb_size=8, n_heads=2, ffn_size=16, window=6, dropout=0.1))
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


WINDOW = "window-mlp"  # the kind of lmcourse/networks/window.py, built here from its kind alone


def window(seed=0):
    torch.manual_seed(seed)
    model = lm.model_builder(WINDOW)(dict(vocab_size=V, context=3, emb_size=6, hidden_size=16))
    model.vocab = Vocab(["<eos>"] + [f"w{i}" for i in range(V - 1)])
    return model


MAKERS = {"gru": gru, "transformer": transformer, WINDOW: window}


def settings(**kw) -> TrainConfig:
    cfg = dict(epochs=3, batch_size=10, eval_batch_size=5, bptt=10, lr=2.0, optimizer="ntasgd", nonmono=1,
               variable_bptt=True, progress=False, live_plot=False)
    cfg.update(kw)
    return TrainConfig(**cfg)


def fit(model, resume=False, **kw):
    with mock.patch("lmcourse.training.trainer.device", lambda: torch.device("cpu")):  # bit identity: the CPU
        return Trainer(model, TRAIN, VALID, settings(**kw)).fit(resume=resume)


@pytest.fixture(scope="module", params=sorted(MAKERS))
def make(request):
    return MAKERS[request.param]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, make):
    out = tmp_path_factory.mktemp("run")
    model = make()
    history = fit(model, out_dir=out)
    return model, history, out


def test_the_model_keeps_the_contract_and_others_are_told_what_they_lack(make):
    for purpose in ("train", "checkpoint", "cache", "dyneval"):
        check_neural(make(), purpose)
    for purpose, who in (("train", "Trainer"), ("checkpoint", "checkpoint"), ("dyneval", "DynamicEval")):
        with pytest.raises(TypeError, match=who) as err:
            check_neural(nn.Linear(2, 2), purpose)
        text = str(err.value)
        assert "init_state" in text and text.endswith(".") and "\n" not in text
    with pytest.raises(TypeError, match="lacks stream"):
        check_neural(type("NoStream", (), {"vocab": None})(), "cache")
    with pytest.raises(ValueError, match="purpose='fly'"):
        check_neural(gru(), "fly")
    stray = type("Stray", (GRULM,), {"kind": "never-registered"})(GRUConfig(V))
    check_neural(stray, "train")  # training needs no registration; storing does
    with pytest.raises(TypeError, match=r"lacks a registered kind \('never-registered' is not; call lmcourse.lm.register"):
        check_neural(stray, "checkpoint")
    with pytest.raises(TypeError, match="registered kind"):  # before any training, not at the first save
        Trainer(stray, TRAIN, VALID, settings(checkpoint="never-written.pt"))


def test_no_class_test_is_left_in_training_or_adapt():
    for folder in ("training", "adapt"):
        for path in (PACKAGE / folder).rglob("*.py"):
            found = re.search(r"isinstance\([^)]*RNNLM", path.read_text())
            assert found is None, f"{path.name} tests for the RNNLM class instead of the contract: {found.group(0)}"
    assert re.search(r"isinstance\([^)]*RNNLM", "if not isinstance(model, RNNLM):")  # the pattern does catch one


def test_the_model_trains(trained):
    _, history, _ = trained
    assert history.stop_reason == "completed" and len(history.rows) == 3
    assert history.best["valid_ppl"] < 0.5 * history.start["valid_ppl"]  # a uniform guess: 12; the cycle: ~2


def test_ar_and_tar_need_the_layers_outputs():
    with pytest.raises(ValueError, match="AR and TAR read the layers' outputs.*train it with alpha=0 and beta=0"):
        fit(gru(), epochs=1, alpha=2.0)


def test_the_model_checkpoints_and_loads_as_itself(trained, tmp_path):
    model, history, out = trained
    path = save_checkpoint(tmp_path / "model.pt", model, history=history)
    loaded, info = load_checkpoint(path, map_location="cpu")
    assert type(loaded) is type(model) and info["kind"] == model.kind and info["config"] == model.config
    assert torch.equal(loaded.score(VALID), model.score(VALID))
    best, _ = load_checkpoint(out / "best.pt", map_location="cpu")  # the run's own best weights
    assert type(best) is type(model) and torch.equal(best.score(VALID), model.score(VALID))


def test_an_unknown_kind_is_one_sentence_naming_the_known_ones(trained, tmp_path):
    model, _, _ = trained
    path = save_checkpoint(tmp_path / "model.pt", model)
    with mock.patch.dict(lm.MODELS, clear=False):
        del lm.MODELS[model.kind]
        with pytest.raises(CheckpointError, match=rf"kind '{model.kind}'.*known: .*rnnlm") as err:
            load_checkpoint(path)
    assert "\n" not in str(err.value) and str(err.value).endswith(".")


def test_the_model_resumes_bit_for_bit(trained, make, tmp_path):
    straight, _, _ = trained
    first = make()
    fit(first, out_dir=tmp_path, epochs=2)
    again = make(seed=5)  # other starting weights: every number must come from last.pt
    history = fit(again, resume=True, out_dir=tmp_path)
    assert [row["epoch"] for row in history.rows] == [1, 2, 3]
    for (name, a), b in zip(straight.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), f"{name} differs from the uninterrupted run's"


def test_the_model_is_scored_under_the_cache(trained):
    model, _, _ = trained
    assert torch.equal(NeuralCache(model, lam=0.0).score(VALID), model.score(VALID))
    cached = NeuralCache(model, theta=1.0, lam=0.3, window=50)
    scores = cached.score(VALID)
    assert not torch.allclose(scores, model.score(VALID))
    state, steps = cached.start(1), []  # the step interface gives the same numbers, token by token
    for x in VALID[:30]:
        steps.append(float(cached.next_log_probs(state)[0, x]))
        state = cached.advance(state, x.view(1))
    assert torch.allclose(torch.tensor(steps, dtype=torch.float64), scores[:30], atol=1e-5)
    glob = NeuralCache(model, theta=1.0, mode="global", alpha=0.5, window=50)
    state = glob.start(2)
    assert torch.allclose(glob.next_log_probs(state).exp().sum(1), torch.ones(2), atol=1e-5)


def test_the_model_is_scored_under_dynamic_evaluation(trained):
    model, _, _ = trained
    before = {k: v.clone() for k, v in model.state_dict().items()}
    dyn = DynamicEval(model, "sgd", lr=0.5, decay=0.0, bptt=5)
    scores, static = dyn.score(VALID), model.score(VALID, bptt=5)  # read in the same segments of 5
    assert torch.allclose(scores[:5], static[:5], rtol=0, atol=1e-10)  # segment 1: the trained weights
    assert not torch.allclose(scores[5:10], static[5:10], rtol=0, atol=1e-6)  # then the adapted ones
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the model is not changed
    stats = gradient_stats(model, TRAIN, batch_size=5, bptt=5, progress=False)
    rms = DynamicEval(model, "rms", lr=1e-3, decay=0.01, eps=1e-4, bptt=5, stats=stats)
    assert math.isfinite(lm.perplexity(rms, VALID))
    state, steps = dyn.start(1), []
    for x in VALID[:12]:
        steps.append(float(dyn.next_log_probs(state)[0, x]))
        state = dyn.advance(state, x.view(1))
    assert torch.allclose(torch.tensor(steps, dtype=torch.float64), scores[:12], atol=1e-5)
    under_both = NeuralCache(dyn, lam=0.0).score(VALID)
    assert torch.allclose(under_both, scores, rtol=0, atol=1e-10)


def test_the_model_generates(trained):
    model, _, _ = trained
    rows = generate.sample(model, max_tokens=8, num_samples=3, seed=1)
    assert len(rows) == 3 and all(len(r) == 8 and all(0 <= t < V for t in r) for r in rows)
    assert rows == generate.sample(model, max_tokens=8, num_samples=3, seed=1)
    beams = generate.beam_search(model, beam_size=3, max_tokens=6, stop_at_eos=False)
    assert len(beams) == 3


def test_perplexity_from_a_mean_nll_has_one_overflow_rule():
    assert perplexity_from_nll(math.log(7.0)) == pytest.approx(7.0)
    assert perplexity_from_nll(709.0) == math.exp(709.0)
    assert perplexity_from_nll(MAX_LOG) == math.inf and perplexity_from_nll(1e9) == math.inf
    assert perplexity_from_nll(math.inf) == math.inf and math.isnan(perplexity_from_nll(math.nan))


# ------------------------------------------------------------------ the window MLP, end to end

def write_corpus(folder: Path, seed: int = 0, words: int = 30) -> Path:
    """A small corpus with some structure: a first word from a short list, then any words."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(words)]

    def lines(n):
        return "".join(" ".join([rng.choice(vocab[:6])] + rng.choices(vocab, k=rng.randint(3, 9))) + "\n"
                       for _ in range(n))

    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 60), ("test", 60)):
        (folder / f"{split}.txt").write_text(lines(n))
    return folder


KIND_ARGS = ["--kind", WINDOW, "--set", "context=3", "--set", "emb_size=8", "--set", "hidden_size=16",
             "--set", "batch_size=10", "--set", "bptt=10", "--set", "lr=2", "--set", "seed=3"]


def cli(capsys, *argv) -> dict:
    """``python -m lmcourse ...`` in this process; its last stdout line, as JSON."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_the_window_mlp_is_registered_by_its_module_alone():
    """Adding the model took one module: no other module of the package names its class, config or kind."""
    assert WINDOW in lm.MODELS and lm.model_config_class(WINDOW).__name__ == "WindowConfig"
    own = PACKAGE / "networks" / "window.py"
    for path in PACKAGE.rglob("*.py"):
        if path != own:
            text = path.read_text()
            assert not re.search(r"WindowMLP|WindowConfig|window-mlp", text), f"{path.name} names the window MLP"
    assert re.search(r"WindowMLP|WindowConfig|window-mlp", own.read_text())  # the pattern does catch it


def test_the_window_mlp_trains_resumes_and_is_evaluated_from_the_command_line(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "tiny")
    out, straight = tmp_path / "run", tmp_path / "straight"
    common = ["train", "--quiet", "--scale", "ci", "--data", str(corpus), *KIND_ARGS]
    first = cli(capsys, *common, "--set", "epochs=2", "--out", str(out))
    assert first["kind"] == WINDOW and first["preset"] is None and first["epochs"] == 2
    record = json.loads((out / "preset.json").read_text())
    assert record["cited"] is False and "nothing cited" in record["note"] and record["settings"]["kind"] == WINDOW
    assert RunDir(out).read_config()["kind"] == WINDOW
    model_config, train_config = load_run_config(out)  # the run directory builds its kind's config
    assert type(model_config).__name__ == "WindowConfig" and model_config.context == 3 and train_config.epochs == 2
    resumed = cli(capsys, *common, "--set", "epochs=3", "--out", str(out), "--resume")
    whole = cli(capsys, *common, "--set", "epochs=3", "--out", str(straight))
    assert resumed["epochs"] == whole["epochs"] == 3
    a, _ = load_checkpoint(out / "best.pt", map_location="cpu")
    b, _ = load_checkpoint(straight / "best.pt", map_location="cpu")
    assert type(a).__name__ == "WindowMLP" and a.kind == WINDOW
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), f"{name}: the resumed run is not the uninterrupted one"
    scored = cli(capsys, "evaluate", str(out), "--cache", "--dyneval")
    assert scored["wrappers"] == ["dyneval", "cache"] and scored["preset"] is None
    assert math.isfinite(scored["valid_ppl"]) and math.isfinite(scored["test_ppl"])
    assert scored["valid_ppl"] != scored["base_valid_ppl"]  # the wrappers changed the scores
    assert scored["dyneval"]["source"] == "dynamic-evaluation code defaults"  # no paper's settings for a kind
    rows = generate.sample(a, max_tokens=6, num_samples=2, seed=0)
    assert len(rows) == 2 and all(len(r) == 6 for r in rows)


def test_the_command_line_says_what_a_kind_needs_in_one_sentence(tmp_path, capsys):
    corpus = str(write_corpus(tmp_path / "tiny"))
    for argv, pattern in ((["--kind", WINDOW], r"TrainConfig has none for the number of epochs: add --set epochs=N"),
                          (["--kind", "nope", "--set", "epochs=1"], r"--kind nope: No model of kind 'nope'"),
                          (["--kind", WINDOW, "--set", "epochs=1", "--set", "kind=rnnlm"], r"train the kind with "
                                                                                             "--kind")):
        assert main(["train", "--quiet", "--scale", "ci", "--data", corpus, "--out", str(tmp_path / "x"), *argv]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and re.search(pattern, err[0]), err


def test_the_window_mlp_is_a_lesson_style_stored_run(tmp_path, monkeypatch, capsys):
    """train_or_load trains it once from its settings (the one adapter builds the kind they name) and loads it back
    from the store as itself."""
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    corpus = load_corpus(write_corpus(tmp_path / "tiny"))
    settings = dict(kind=WINDOW, context=3, emb_size=8, hidden_size=16, epochs=1, batch_size=10, bptt=10, lr=2.0,
                    seed=0)
    run_of = Adapter(lambda s: s)
    calls = []

    def fit():
        calls.append(1)
        torch.manual_seed(settings["seed"])
        model = run_of.build(settings, len(corpus.vocab))
        model.vocab = corpus.vocab
        config = run_of.train_config(settings, progress=False, live_plot=False)
        return model, Trainer(model, corpus.train, corpus.valid, config).fit()

    key = dict(scale="cpu", dataset="tiny", reference_run=False)
    trained = train_or_load("99-window", settings, fit, corpus.vocab, **key)
    loaded = train_or_load("99-window", settings, fit, corpus.vocab, **key)
    assert calls == [1] and not trained.loaded and loaded.loaded
    assert type(loaded.model).__name__ == "WindowMLP" and loaded.history == trained.history
    assert torch.equal(loaded.model.score(corpus.valid), trained.model.cpu().score(corpus.valid))


def test_a_run_directory_written_before_kinds_reads_as_the_lstms(tmp_path):
    """The compatibility path (lmcourse.training.compat): a config.json without "kind" holds an rnnlm."""
    from lmcourse.networks.models import LMConfig, RNNLM

    torch.manual_seed(0)
    model = RNNLM(LMConfig(vocab_size=V, emb_size=6, hidden_size=8, num_layers=1))
    model.vocab = gru().vocab
    fit(model, out_dir=tmp_path, epochs=1, optimizer="sgd")
    path = tmp_path / "config.json"
    record = json.loads(path.read_text())
    assert record["kind"] == "rnnlm"
    del record["kind"]
    path.write_text(json.dumps(record))
    model_config, _ = load_run_config(tmp_path)
    assert model_config == model.config
    record["kind"] = WINDOW  # the same file naming another kind is read as that kind's: here, invalid settings
    path.write_text(json.dumps(record))
    with pytest.raises(Exception, match="holds settings that are not valid"):
        load_run_config(tmp_path)


@pytest.mark.cuda
def test_the_gru_trains_stores_and_is_scored_on_cuda(trained, tmp_path):
    model, _, _ = trained
    cuda = copy.deepcopy(model).to("cuda")
    assert torch.allclose(cuda.score(VALID), model.score(VALID), atol=1e-4)
    cache = {m: NeuralCache(m, lam=0.3, window=50).score(VALID) for m in (model, cuda)}
    assert torch.allclose(cache[cuda], cache[model], atol=1e-4)
    dyn = {m: DynamicEval(m, "sgd", lr=0.5, bptt=5).score(VALID[:60]) for m in (model, cuda)}
    assert torch.allclose(dyn[cuda], dyn[model], atol=1e-3)
    fresh = gru()
    with mock.patch("lmcourse.training.trainer.device", lambda: torch.device("cuda")):
        history = Trainer(fresh, TRAIN, VALID, settings(epochs=1)).fit()
    assert fresh.device.type == "cuda" and history.best["valid_ppl"] < history.start["valid_ppl"]
    loaded, _ = load_checkpoint(save_checkpoint(tmp_path / "cuda.pt", fresh), map_location="cuda")
    assert loaded.device.type == "cuda" and torch.equal(loaded.score(VALID), fresh.score(VALID))
