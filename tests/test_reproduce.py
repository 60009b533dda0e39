"""The reproduction path on the command line: `train` works at ci for every preset, `--resume`
continues bit for bit, finetuning starts from the trained run, `evaluate` scores with the cache and
dynamic evaluation, errors are one line, and two gloo processes under torchrun train with only
rank 0 writing."""
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmcourse.adapt import evaluate as evaluation
from lmcourse.cli import reproduce
from lmcourse.cli.main import main
from lmcourse.adapt.cache import NeuralCache
from lmcourse.corpora.data import load_corpus
from lmcourse.lm import perplexity
from lmcourse.training import callbacks as live
from lmcourse.training import presets, rundir
from lmcourse.training.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]
RUN_FILES = {"config.json", "history.json", "best.pt", "last.pt", "curves.png", reproduce.META}


def write_corpus(folder: Path, seed: int = 0, words: int = 40) -> Path:
    """A small corpus with a little structure: a first word from a short list, then any words."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(words)]

    def lines(n):
        return "".join(" ".join([rng.choice(vocab[:10])] + rng.choices(vocab, k=rng.randint(3, 12))) + "\n"
                       for _ in range(n))

    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 500), ("valid", 80), ("test", 80)):
        (folder / f"{split}.txt").write_text(lines(n))
    return folder


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus") / "tiny")


def train(capsys, *argv, status=0) -> dict:
    """Run ``python -m lmcourse train ...`` in this process; return its last stdout line as JSON."""
    code = main(["train", "--quiet", "--scale", "ci", *argv])
    out, err = capsys.readouterr()
    assert code == status, err
    return json.loads(out.strip().splitlines()[-1])


def fail(capsys, *argv, status=1) -> str:
    """Run a command that must fail; return its one stderr line."""
    assert main([*argv]) == status
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture(scope="module")
def base_runs(corpus, tmp_path_factory):
    """The runs finetuning presets continue: each base preset trained once at ci."""
    folder = tmp_path_factory.mktemp("bases")
    runs = {}
    for p in presets.PRESETS.values():
        if p.finetune_of and p.finetune_of not in runs:
            out = folder / p.finetune_of
            assert main(["train", "--quiet", "--scale", "ci", "--preset", p.finetune_of, "--data", str(corpus),
                         "--out", str(out)]) == 0
            runs[p.finetune_of] = out
    return runs


@pytest.mark.parametrize("name", list(presets.PRESETS))
def test_every_preset_trains_at_ci(name, corpus, base_runs, tmp_path, capsys):
    capsys.readouterr()
    p = presets.get(name)
    extra = ["--from", str(base_runs[p.finetune_of])] if p.finetune_of else []
    result = train(capsys, "--preset", name, "--data", str(corpus), "--out", str(tmp_path / "run"), *extra)
    settings = presets.resolve(p, "ci")
    assert result["preset"] == name and result["stop_reason"] in ("completed", "non-monotone")
    assert 1 <= result["epochs"] <= settings["epochs"] and result["world_size"] == 1
    assert 1 < result["valid_ppl"] < 100 and 1 < result["test_ppl"] < 100  # 50 words: uniform is 52
    assert RUN_FILES <= {f.name for f in (tmp_path / "run").iterdir()}
    model, info = load_checkpoint(tmp_path / "run" / "best.pt", map_location="cpu")
    assert model.config == presets.model_config(settings, len(model.vocab))
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    optimizers = {row["optimizer"] for row in history["rows"]}
    assert optimizers <= {"sgd", "asgd", "adam"} and (settings["optimizer"] != "asgd" or optimizers == {"asgd"})
    assert (settings["optimizer"] == "adam") == (optimizers == {"adam"})
    if p.finetune_of:  # it starts from the trained run: its starting validation is that run's best
        base = json.loads((base_runs[p.finetune_of] / "history.json").read_text())
        assert history["start"]["valid_loss"] == pytest.approx(base["best"]["valid_loss"], rel=1e-6)


def test_the_transformer_preset_trains_resumes_and_evaluates_on_the_embedded_corpus(tmp_path, capsys):
    out = tmp_path / "t"
    first = train(capsys, "--preset", "transformer-ptb", "--data", "embedded", "--out", str(out))
    assert first["epochs"] == presets.resolve(presets.get("transformer-ptb"), "ci")["epochs"] == 2
    model, _ = load_checkpoint(out / "best.pt", map_location="cpu")
    assert model.kind == "transformer" and json.loads((out / reproduce.META).read_text())["settings"]["kind"] == \
        "transformer"
    more = train(capsys, "--preset", "transformer-ptb", "--data", "embedded", "--out", str(out), "--resume",
                 "--set", "epochs=3")
    rows = json.loads((out / "history.json").read_text())["rows"]
    assert more["epochs"] == 3 and [r["epoch"] for r in rows] == [1, 2, 3] and more["params"] == first["params"]
    assert rows[2]["valid_loss"] < rows[0]["valid_loss"]  # the third epoch trained on from the second
    assert main(["evaluate", str(out), "--cache", "--dyneval"]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scored["preset"] == "transformer-ptb" and scored["wrappers"] == ["dyneval", "cache"]
    assert scored["base_valid_ppl"] == pytest.approx(more["valid_ppl"], rel=1e-4)
    assert 1 < scored["valid_ppl"] < scored["base_valid_ppl"]  # 3 epochs: far from fitted, and both wrappers help


def test_zaremba_follows_its_fixed_schedule(corpus, tmp_path, capsys):
    result = train(capsys, "--preset", "zaremba-medium", "--data", str(corpus), "--out", str(tmp_path / "z"),
                   "--set", "epochs=4", "--set", "decay_after=2")
    rows = json.loads((tmp_path / "z" / "history.json").read_text())["rows"]
    T = presets.get("zaremba-medium").settings["bptt"]
    assert result["epochs"] == 4
    assert [r["lr"] for r in rows] == pytest.approx([T, T, T / 1.2, T / 1.2 ** 2])  # lr 1 x bptt, then / 1.2


def test_finetuning_stops_on_the_non_monotone_trigger(corpus, base_runs, tmp_path, capsys):
    from lmcourse.training.optim import should_switch_to_asgd

    result = train(capsys, "--preset", "awd-lstm-ptb-finetune", "--data", str(corpus), "--out", str(tmp_path / "f"),
                   "--from", str(base_runs["awd-lstm-ptb"]), "--set", "epochs=20")
    losses = [r["valid_loss"] for r in json.loads((tmp_path / "f" / "history.json").read_text())["rows"]]
    assert result["stop_reason"] == "non-monotone" and len(losses) < 20
    fired = [should_switch_to_asgd(losses[:i], losses[i], 1) for i in range(len(losses))]
    assert fired[-1] and not any(fired[:-1])  # it stopped at the first epoch the trigger fired


# ------------------------------------------------------------------------------- exact resume

def interrupt_at(epoch: int, batch: int):
    """A ProgressBar.on_batch_end that presses Ctrl-C once, at ``(epoch, batch)``."""
    fired = []

    def on_batch_end(self, trainer, batch_idx, loss):
        if (trainer.epoch, batch_idx) == (epoch, batch) and not fired:
            fired.append(True)
            raise KeyboardInterrupt

    return on_batch_end


def _state(folder: Path) -> dict:
    last = torch.load(folder / "last.pt", weights_only=True)
    best = torch.load(folder / "best.pt", weights_only=True)
    return {"weights": last["state_dict"], "best": best["state_dict"], "optimizer": last["optimizer"],
            "valid": [r["valid_loss"] for r in last["history"]["rows"]]}


def _same(a: dict, b: dict) -> bool:
    def equal(x, y):
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(equal(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)):
            return len(x) == len(y) and all(equal(u, v) for u, v in zip(x, y))
        return x == y
    return equal(a, b)


@pytest.mark.parametrize("name", ["awd-lstm-ptb", "mos-wt2", "zaremba-medium"])
def test_an_interrupted_run_resumes_bit_for_bit(name, corpus, tmp_path, capsys, monkeypatch):
    args = ["--preset", name, "--data", str(corpus), "--set", "epochs=5"]
    straight = train(capsys, *args, "--out", str(tmp_path / "straight"))
    with monkeypatch.context() as m:
        m.setattr(live.ProgressBar, "on_batch_end", interrupt_at(epoch=3, batch=1))
        assert main(["train", "--quiet", "--scale", "ci", *args, "--out", str(tmp_path / "broken")]) == 130
    err = capsys.readouterr().err
    assert "--resume" in err and "interrupted" in err
    assert json.loads((tmp_path / "broken" / "history.json").read_text())["stop_reason"] == "interrupted"
    resumed = train(capsys, *args, "--out", str(tmp_path / "broken"), "--resume")
    a, b = _state(tmp_path / "straight"), _state(tmp_path / "broken")
    assert _same(a, b)
    assert (straight["valid_ppl"], straight["test_ppl"]) == (resumed["valid_ppl"], resumed["test_ppl"])
    if name == "awd-lstm-ptb":  # NT-ASGD switched, so the averages were carried over too
        assert a["optimizer"]["name"] == "asgd" and "ax" in a["optimizer"]["state"]["state"][0]
    # the comparison can fail: a resume that does not put back the random states ends elsewhere
    shutil.rmtree(tmp_path / "broken")
    with monkeypatch.context() as m:
        m.setattr(live.ProgressBar, "on_batch_end", interrupt_at(epoch=3, batch=1))
        assert main(["train", "--quiet", "--scale", "ci", *args, "--out", str(tmp_path / "broken")]) == 130
    with monkeypatch.context() as m:
        m.setattr("lmcourse.training.resume.restore_rng", lambda state: None)
        train(capsys, *args, "--out", str(tmp_path / "broken"), "--resume")
    assert not _same(a, _state(tmp_path / "broken"))


def test_resume_of_a_finished_run_trains_nothing_and_can_add_epochs(corpus, tmp_path, capsys):
    args = ["--preset", "pytorch-examples", "--data", str(corpus), "--out", str(tmp_path / "r")]
    first = train(capsys, *args, "--set", "epochs=2")
    again = train(capsys, *args, "--set", "epochs=2", "--resume")
    assert (again["epochs"], again["valid_ppl"], again["seconds_per_epoch"]) == (2, first["valid_ppl"], None)
    more = train(capsys, *args, "--set", "epochs=3", "--resume")
    assert more["epochs"] == 3


# ------------------------------------------------------------------------------- evaluate

def test_evaluate_scores_the_best_weights_alone_and_with_wrappers(corpus, tmp_path, capsys):
    trained = train(capsys, "--preset", "awd-lstm-ptb", "--data", str(corpus), "--out", str(tmp_path / "e"))
    assert main(["evaluate", str(tmp_path / "e")]) == 0
    alone = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (alone["valid_ppl"], alone["test_ppl"]) == (trained["valid_ppl"], trained["test_ppl"])
    assert alone["wrappers"] == [] and alone["preset"] == "awd-lstm-ptb"

    assert main(["evaluate", str(tmp_path / "e"), "--cache"]) == 0
    cached = json.loads(capsys.readouterr().out.splitlines()[-1])
    paper = presets.get("awd-lstm-ptb").evaluation["cache"]  # the paper's PTB pointer settings
    assert {k: cached["cache"][k] for k in ("theta", "lam", "window")} == {k: paper[k] for k in ("theta", "lam",
                                                                                               "window")}
    data = load_corpus(str(corpus))
    model, _ = load_checkpoint(tmp_path / "e" / "best.pt", vocab=data.vocab, map_location="cpu")
    settings = presets.resolve(presets.get("awd-lstm-ptb"), "ci")
    test = data.test[:settings["test_tokens"]]
    expected = perplexity(NeuralCache(model, paper["theta"], paper["lam"], paper["window"]), test)
    assert cached["test_ppl"] == pytest.approx(expected, abs=1e-3) and cached["test_ppl"] != alone["test_ppl"]

    assert main(["evaluate", str(tmp_path / "e" / "best.pt")]) == 0  # a checkpoint in a run directory is that run's
    inside = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert inside["preset"] == "awd-lstm-ptb" and inside["data"] == "tiny"
    assert (inside["valid_ppl"], inside["test_ppl"]) == (alone["valid_ppl"], alone["test_ppl"])

    shutil.copy(tmp_path / "e" / "best.pt", tmp_path / "copy.pt")  # outside any run: no preset, whole splits
    assert main(["evaluate", str(tmp_path / "copy.pt"), "--data", str(corpus), "--dyneval", "--cache",
                 "--tune-on", "valid"]) == 0
    tuned = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert tuned["wrappers"] == ["dyneval", "cache"] and tuned["preset"] is None
    assert tuned["cache"]["source"] == tuned["dyneval"]["source"] == "tuned on valid"
    assert tuned["cache"]["theta"] in evaluation.CACHE_THETAS and tuned["cache"]["lam"] in evaluation.CACHE_LAMS
    assert tuned["valid_ppl"] < tuned["base_valid_ppl"]


# ------------------------------------------------------------------------------- errors

def test_mistakes_are_one_line_and_touch_nothing(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--quiet", "--scale", "ci", "--preset", "awd-lstm-ptb", "--data", str(corpus), "--out", str(out)]
    assert "no setting 'lrr'" in fail(capsys, *args, "--set", "lrr=3")
    assert "dropouti=1.5 is not a dropout probability" in fail(capsys, *args, "--set", "dropouti=1.5")
    assert not out.exists()
    assert "no run to resume" in fail(capsys, *args, "--resume")
    assert "invalid choice" in fail(capsys, "train", "--preset", "awd-lstm", status=2)
    assert main(args) == 0
    capsys.readouterr()
    meta = (out / reproduce.META).read_bytes()
    assert "already holds a run" in fail(capsys, *args)
    assert "only epochs may change" in fail(capsys, *args, "--resume", "--set", "dropouti=0.5")
    assert (out / reproduce.META).read_bytes() == meta
    finetune = ["train", "--scale", "ci", "--preset", "awd-lstm-ptb-finetune", "--data", str(corpus)]
    assert "train it first" in fail(capsys, *finetune, "--from", str(tmp_path / "nowhere"), "--out", str(tmp_path / "f"))
    assert "emb_size=16" in fail(capsys, *finetune, "--from", str(out), "--out", str(tmp_path / "g"),
                                 "--set", "emb_size=20")
    other = write_corpus(tmp_path / "other", seed=1, words=30)
    assert "vocabulary" in fail(capsys, "evaluate", str(out), "--data", str(other))
    assert "does not exist" in fail(capsys, "evaluate", str(tmp_path / "missing"))


def test_help_lists_every_preset_with_its_published_numbers(capsys):
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for p in presets.PRESETS.values():
        assert p.name in text
        for row in presets.published_rows(p):
            assert f"{row.test:g}" in text


# ------------------------------------------------------------------------------- torchrun

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **extra)
    env.pop("LMCOURSE_SCALE", None)
    return env


needs_distributed = pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
TRAIN = ["-m", "lmcourse", "train", "--quiet", "--scale", "ci", "--preset", "awd-lstm-ptb"]


@needs_distributed
def test_torchrun_trains_two_gloo_processes(corpus, tmp_path):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
                f"--master_port={_free_port()}"]
    done = subprocess.run(torchrun + TRAIN + ["--data", str(corpus), "--out", "run"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert len(lines) == 1 and done.stdout.strip().splitlines()[-1] == lines[0]  # one JSON line: rank 0's
    result = json.loads(lines[0])
    assert result["world_size"] == 2 and result["stop_reason"] == "completed"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["world_size"] == 2
    assert RUN_FILES <= {f.name for f in (tmp_path / "run").iterdir()}


@needs_distributed
def test_only_rank_zero_writes(corpus, tmp_path):
    """The two ranks of a gloo group run in different folders: only rank 0's gets the run."""
    port, procs = _free_port(), []
    for rank in range(2):
        (tmp_path / f"rank{rank}").mkdir()
        env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                   LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable] + TRAIN + ["--data", str(corpus), "--out", "run"],
                                      cwd=tmp_path / f"rank{rank}", env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    assert RUN_FILES <= {f.name for f in (tmp_path / "rank0" / "run").iterdir()}
    assert list((tmp_path / "rank1").iterdir()) == []
    assert json.loads(outputs[0][0].splitlines()[-1])["world_size"] == 2 and outputs[1][0] == ""


def test_real_ptb_at_ci(real_data_dir, tmp_path, capsys):
    result = train(capsys, "--preset", "zaremba-medium", "--data", "ptb", "--out", str(tmp_path / "ptb"))
    assert result["data"] == "ptb" and result["params"] > 10_000 * 16 * 2  # embedding and decoder of 10k words
    assert 100 < result["test_ppl"] < 10_000
    assert rundir.LAST in {f.name for f in (tmp_path / "ptb").iterdir()}


@pytest.mark.parametrize("reason, rows, done", [("converged", 3, True), ("non-monotone", 3, True),
                                                ("completed", 5, True), ("completed", 3, False), (None, 3, False)])
def test_a_run_that_stopped_by_its_rule_is_finished(monkeypatch, tmp_path, reason, rows, done):
    from types import SimpleNamespace

    from lmcourse.cli import reproduce

    history = SimpleNamespace(stop_reason=reason, rows=[{}] * rows)
    monkeypatch.setattr(reproduce, "_history_of", lambda out: history)
    assert reproduce._finished(tmp_path, epochs=5) is done
