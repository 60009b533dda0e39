"""lmcourse.cli: a train that cannot run deletes nothing, an --overwrite that fails puts the earlier run back,
and what the command line says about a run's files is true."""
import json
import random
import shutil
import warnings
from pathlib import Path

import pytest

from lmcourse.cli import reproduce
from lmcourse.training.trainer import Trainer

from .helpers import assert_one_sentence, cli, files_under, write_corpus


def small_corpus(folder: Path) -> Path:
    """About 6,000 tokens of 30 word types, enough for a preset at ci."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(30)]
    lines = lambda n: "".join(" ".join(rng.choices(words, k=rng.randint(3, 10))) + "\n" for _ in range(n))  # noqa
    return write_corpus(folder, train=lines(700), valid=lines(100), test=lines(100))


def train_argv(corpus, out, *more) -> list:
    return ["train", "--quiet", "--scale", "ci", "--preset", "pytorch-examples", "--data", str(corpus),
            "--out", str(out), "--set", "epochs=1", *more]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished ci run on a small folder corpus, trained once; tests copy it."""
    root = tmp_path_factory.mktemp("trained")
    corpus = small_corpus(root / "mine")
    assert cli_main(train_argv(corpus, root / "run")) == 0
    return corpus, root / "run"


def cli_main(argv) -> int:
    from lmcourse.__main__ import main
    return main(argv)


def copy_run(trained, home) -> Path:
    return Path(shutil.copytree(trained[1], home / "run"))


def _bad_data(home: Path, corpus: Path, kind: str) -> list:
    """The --data and --set of a command that must fail, for a mistake of ``kind``."""
    if kind == "missing --data folder":
        return ["--data", str(home / "nowhere" / "corpus")]
    if kind == "non-UTF-8 corpus":
        bad = Path(shutil.copytree(corpus, home / "latin"))
        (bad / "valid.txt").write_bytes("caf\xe9\n".encode("latin-1"))
        return ["--data", str(bad)]
    if kind == "blank train.txt":
        bad = Path(shutil.copytree(corpus, home / "blank"))
        (bad / "train.txt").write_text("\n  \n")
        return ["--data", str(bad)]
    if kind == "batch_size larger than the corpus":
        return ["--set", "batch_size=100000"]
    if kind == "model too big for memory":
        return ["--set", "hidden_size=100000000"]
    if kind == "offline download":
        return ["--data", "ptb"]
    if kind == "bad setting":
        return ["--set", "lr=nan"]
    raise AssertionError(kind)


MISTAKES = ["missing --data folder", "non-UTF-8 corpus", "blank train.txt", "batch_size larger than the corpus",
            "model too big for memory", "offline download", "bad setting"]


@pytest.mark.parametrize("kind", MISTAKES)
def test_overwrite_with_a_mistake_keeps_the_finished_run(home, capsys, trained, kind):
    run = copy_run(trained, home)
    before = files_under(run)
    argv = train_argv(trained[0], run, "--overwrite", *_bad_data(home, trained[0], kind))
    code, out, err = cli(capsys, argv)
    assert code == 1, err
    assert_one_sentence(err.strip().splitlines()[-1].removeprefix("error: "), r".")
    assert files_under(run) == before, f"{kind}: the finished run was changed"
    assert not (run / reproduce.ASIDE).exists()


@pytest.mark.parametrize("kind", ["batch_size larger than the corpus", "blank train.txt", "bad setting"])
def test_a_refused_fresh_run_leaves_no_file_and_the_corrected_command_runs(home, capsys, trained, kind):
    out = home / "fresh"
    code, _, _ = cli(capsys, train_argv(trained[0], out, *_bad_data(home, trained[0], kind)))
    assert code == 1
    assert not (out / reproduce.META).exists() and not [p for p in out.glob("*") if p.name != ".lock"]
    code, _, err = cli(capsys, train_argv(trained[0], out))
    assert code == 0, err


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError, MemoryError])
def test_an_overwrite_stopped_before_its_first_epoch_puts_the_earlier_run_back(home, capsys, trained, monkeypatch,
                                                                                stop):
    run = copy_run(trained, home)
    before = files_under(run)

    def fail(self, *args, **kwargs):
        assert not (run / "last.pt").exists() and (run / reproduce.META).exists()  # the earlier run is aside
        raise stop("stopped")
    monkeypatch.setattr(Trainer, "fit", fail)
    code, _, _ = cli(capsys, train_argv(trained[0], run, "--overwrite", "--set", "seed=5"))
    assert code == (130 if stop is KeyboardInterrupt else 1)
    assert files_under(run) == before and not (run / reproduce.ASIDE).exists()


def test_an_overwrite_that_saved_an_epoch_replaces_the_earlier_run(home, capsys, trained):
    run = copy_run(trained, home)
    code, _, err = cli(capsys, train_argv(trained[0], run, "--overwrite", "--set", "seed=5"))
    assert code == 0, err
    assert json.loads((run / reproduce.META).read_text())["settings"]["seed"] == 5
    assert not (run / reproduce.ASIDE).exists()


@pytest.mark.parametrize("new_epoch", [False, True], ids=["killed before an epoch", "killed after one"])
def test_an_overwrite_killed_outright_is_settled_by_the_next_command(home, capsys, trained, new_epoch):
    run = copy_run(trained, home)
    before = files_under(run)
    reproduce.Aside(run).move()  # what a process killed during the new run's start leaves
    (run / reproduce.META).write_text("{}")
    if new_epoch:
        shutil.copy(run / reproduce.ASIDE / "last.pt", run / "last.pt")  # stands in for the new run's epoch
    code, _, err = cli(capsys, train_argv(trained[0], run, "--resume"))
    assert not (run / reproduce.ASIDE).exists()
    if new_epoch:  # the new run had kept an epoch: it stays, the earlier run is gone
        assert (run / "last.pt").is_file() and json.loads((run / reproduce.META).read_text()) == {}
    else:  # the earlier run is back, whole, and resumes (it had finished: nothing to train)
        assert code == 0, err
        assert {k: v for k, v in files_under(run).items() if not k.endswith(".json")} == \
            {k: v for k, v in before.items() if not k.endswith(".json")}


@pytest.mark.parametrize("same", ["same path", "trailing slash", "via ..", "relative and absolute"])
def test_finetuning_into_the_run_it_starts_from_is_refused(home, capsys, trained, monkeypatch, same):
    run = copy_run(trained, home)
    before = files_under(run)
    monkeypatch.chdir(home)
    source, out = {"same path": (str(run), str(run)), "trailing slash": (str(run), str(run) + "/"),
                   "via ..": (str(run), str(run / ".." / "run")), "relative and absolute": ("run", str(run))}[same]
    argv = ["train", "--quiet", "--scale", "ci", "--preset", "awd-lstm-ptb-finetune", "--data", str(trained[0]),
            "--from", source, "--out", out, "--overwrite"]
    code, _, err = cli(capsys, argv)
    assert code == 1
    assert_one_sentence(err.removeprefix("error: "), r"--from and --out are the same folder .*give --out another folder")
    assert files_under(run) == before


# ------------------------------------------------------------------ what the command line says is true

def _history(run: Path, reason: str) -> None:
    state = json.loads((run / "history.json").read_text())
    state["stop_reason"] = reason
    (run / "history.json").write_text(json.dumps(state))


@pytest.mark.parametrize("reason, pattern", [
    ("nan", r"holds no best\.pt: its run diverged before any epoch gave weights worth keeping"),
    ("diverged", r"holds no best\.pt: its run diverged"),
    ("completed", r"holds no best\.pt: its run ended \(completed\) without saving best weights"),
    ("non-monotone", r"holds no best\.pt: its run ended \(non-monotone\)"),
])
def test_evaluate_of_a_finished_run_without_best_pt_does_not_ask_for_an_epoch(home, capsys, trained, reason, pattern):
    run = copy_run(trained, home)
    (run / "best.pt").unlink()
    _history(run, reason)
    code, _, err = cli(capsys, ["evaluate", str(run)])
    assert code == 1
    assert_one_sentence(err.removeprefix("error: "), pattern)
    assert "finish an epoch" not in err


@pytest.mark.parametrize("best", [True, False])
@pytest.mark.parametrize("reason", ["nan", "diverged"])
def test_a_divergence_names_best_weights_only_when_there_are_some(tmp_path, best, reason):
    if best:
        (tmp_path / "best.pt").write_bytes(b"weights")
    with pytest.raises(Exception) as err:
        reproduce._raise_if_stopped(reason, tmp_path)
    message = str(err.value)
    assert ("the best weights so far are in" in message) == best
    assert ("no epoch gave weights worth keeping" in message) == (not best)


@pytest.mark.parametrize("text", ["Training diverged at epoch 3", "The run was saved by 2 processes"])
def test_a_warning_is_one_line_without_its_source_file(home, capsys, monkeypatch, text):
    def warn(args):
        warnings.warn(text + ".", RuntimeWarning)
    monkeypatch.setattr(reproduce, "run_evaluate", warn)
    code, _, err = cli(capsys, ["evaluate", str(home)])
    assert code == 0
    assert err == f"warning: {text}.\n"


# ------------------------------------------------------------------ Ctrl-C stops at once, once

REPO = Path(__file__).resolve().parents[2]


def _child_env(home: Path) -> dict:
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMCOURSE_")}
    env.update(PYTHONPATH=str(REPO), CI="1", OMP_NUM_THREADS="1", LMCOURSE_CACHE=str(home / "cache"))
    return env


@pytest.mark.parametrize("when", ["after an epoch", "in the first epoch"])
def test_ctrl_c_ends_train_with_its_last_epoch_and_no_score(home, trained, when):
    import signal
    import subprocess
    import sys

    out = home / "run"
    argv = [sys.executable, "-m", "lmcourse"] + train_argv(trained[0], out, "--set", "epochs=100000")
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env(home))
    try:
        if when == "after an epoch":
            while "epoch   1 |" not in child.stdout.readline():  # the first epoch was saved
                assert child.poll() is None, child.stderr.read()
        else:
            assert "parameters" in child.stdout.readline()  # the run has started its first epoch
        child.send_signal(signal.SIGINT)
        stdout, stderr = child.communicate(timeout=120)  # 100,000 epochs would take days: it stopped
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, stderr
    assert '"valid_ppl"' not in stdout  # no score of weights that were not saved
    last = stderr.strip().splitlines()[-1]
    assert_one_sentence(last.removeprefix("error: "), r"^interrupted; ")
    history = json.loads((out / "history.json").read_text()) if (out / "history.json").exists() else {}
    if when == "after an epoch":
        assert (out / "last.pt").is_file() and history["stop_reason"] == "interrupted" and len(history["rows"]) >= 1


STUCK = """
import sys, time
from lmcourse.cli.stop import PromptStop
with PromptStop("the test's note.", grace_s=float(sys.argv[1])):
    print("ready", flush=True)
    while True:  # a main thread that does not stop by itself, as one long step inside torch would not
        try:
            time.sleep(100)
        except KeyboardInterrupt:
            pass
"""


@pytest.mark.parametrize("grace", ["0.2", "1"])
def test_a_main_thread_that_does_not_stop_is_ended_after_the_grace_period(home, grace):
    import signal
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", STUCK, grace], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=_child_env(home))
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)  # without the watcher it would sleep for ever
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130
    assert stderr.strip() == "error: interrupted; the test's note."


def test_prompt_stop_restores_the_wakeup_fd_and_is_quiet_without_a_signal():
    import signal

    from lmcourse.cli.stop import PromptStop

    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    with PromptStop("note"):
        inside = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(inside)
        assert inside != before
    after = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(after)
    assert after == before
