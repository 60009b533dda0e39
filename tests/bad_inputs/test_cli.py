"""lmcourse.cli: a train that cannot run deletes nothing, an --overwrite that fails puts the earlier run back,
and what the command line says about a run's files is true."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from lmcourse import config
from lmcourse.cli import reproduce
from lmcourse.corpora import data, download
from lmcourse.errors import ConfigError, RunDirError
from lmcourse.networks.models import LMConfig, RNNLM
from lmcourse.training.checkpoint import save_checkpoint
from lmcourse.training.trainer import load_run_config, Trainer

from .helpers import (
    assert_one_sentence,
    child_env,
    cli,
    copy_run,
    files_under,
    REPO,
    small_corpus,
    train_argv,
    write_corpus,
)

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


@pytest.mark.parametrize("marker, moved", [(".moving", ["best.pt", "history.json"]),
                                           (".moving", ["last.pt"]),
                                           (".restoring", ["config.json", "preset.json"]),
                                           (".restoring", ["best.pt"])])
def test_a_move_or_restore_cut_short_is_finished_by_the_next_command(home, capsys, trained, marker, moved):
    run = copy_run(trained, home)
    before = files_under(run)
    (run / reproduce.ASIDE).mkdir()
    (run / reproduce.ASIDE / marker).touch()
    for name in moved:  # the files that had reached .overwritten/ when the process was killed
        (run / name).rename(run / reproduce.ASIDE / name)
    code, _, err = cli(capsys, train_argv(trained[0], run, "--resume"))
    assert code == 0, err
    assert not (run / reproduce.ASIDE).exists()
    assert {k: v for k, v in files_under(run).items() if not k.endswith(".json")} == \
        {k: v for k, v in before.items() if not k.endswith(".json")}


def test_ctrl_c_during_the_renames_waits_for_their_end():
    import os

    from lmcourse.cli.stop import deferred_interrupt

    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the block ran to its end")
    assert done == ["the block ran to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


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

def _child_env(home: Path) -> dict:
    return {**child_env(), "LMCOURSE_CACHE": str(home / "cache"), "OMP_NUM_THREADS": "1"}


@pytest.mark.parametrize("when", ["after an epoch", "in the first epoch"])
def test_ctrl_c_ends_train_with_its_last_epoch_and_no_score(home, trained, when):
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
    ready = False
    while True:  # a main thread that does not stop by itself, as one long step inside torch would not
        try:  # "ready" is printed inside the try, so an interrupt right after it is caught too
            if not ready:
                ready = True
                print("ready", flush=True)
            time.sleep(100)
        except KeyboardInterrupt:
            pass
"""


@pytest.mark.parametrize("grace", ["0.2", "1"])
def test_a_main_thread_that_does_not_stop_is_ended_after_the_grace_period(home, grace):
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


# -------------------------------------------------------------------------------- the command line


def _corpus_folder(root: Path, kind: str) -> str:
    folder = root / "corpus"
    if kind == "file":
        (root / "notes.txt").write_text("hello\n")
        return str(root / "notes.txt")
    if kind == "missing folder":
        return str(root / "nowhere" / "corpus")
    write_corpus(folder)
    if kind == "no test.txt":
        (folder / "test.txt").unlink()
    elif kind == "empty valid":
        (folder / "valid.txt").write_text("")
    elif kind == "latin-1":
        (folder / "valid.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    elif kind == "folder as split":
        (folder / "test.txt").unlink()
        (folder / "test.txt").mkdir()
    elif kind == "vocab misses a word":
        (folder / "vocab.txt").write_text("the\ncat\n<eos>\n")
    elif kind == "vocab repeats a word":
        (folder / "vocab.txt").write_text("the\ncat\nthe\n")
    return str(folder)


CLI_CASES = [
    # (argv with {corpus} for the folder made by `kind`, kind, exit status, message pattern)
    (["data", "--data", "ptb"], None, 1, r"Could not download train\.txt .*could not connect.*LMCOURSE_DATA"),
    (["data", "--data", "wikitext-2"], None, 1, r"Could not download .*offline embedded corpus"),
    (["data", "--data", "tinyshakespeare", "--level", "char"], None, 1, r"Could not download input\.txt"),
    (["ngram", "--data", "ptb", "--order", "3"], None, 1, r"Could not download"),
    (["data", "--data", "penn-treebank"], None, 1, r"Unknown corpus 'penn-treebank': use one of"),
    (["data", "--data", ""], None, 1, r"Unknown corpus '': use one of"),
    (["data", "--data", "{corpus}"], "file", 1, r"notes\.txt is a file, not a folder"),
    (["data", "--data", "{corpus}"], "missing folder", 1, r"does not exist: give a folder"),
    (["data", "--data", "{corpus}"], "no test.txt", 1, r"has no test\.txt"),
    (["data", "--data", "{corpus}"], "folder as split", 1, r"test\.txt is a folder, not a text file"),
    (["data", "--data", "{corpus}"], "empty valid", 1, r"valid\.txt is empty"),
    (["data", "--data", "{corpus}"], "latin-1", 1, r"valid\.txt is not UTF-8 text \(byte 3 .*save it as UTF-8"),
    (["data", "--data", "{corpus}", "--level", "char"], "latin-1", 1, r"valid\.txt is not UTF-8"),
    (["data", "--data", "{corpus}"], "vocab misses a word", 1, r"'sat' of train\.txt is not in .*vocab\.txt"),
    (["data", "--data", "{corpus}"], "vocab repeats a word", 1, r"vocab\.txt lists the token 'the' more than once"),
    (["data", "--data", "{corpus}", "--min-count", "0"], "ok", 1, r"min_count must be at least 1"),
    (["data", "--data", "{corpus}", "--min-count", "2", "--level", "char"], "ok", 1, r"leave it at 1"),
    (["data", "--data", "{corpus}", "--min-count", "two"], "ok", 2, r"--min-count: invalid int value"),
    (["data", "--level", "byte"], None, 2, r"--level: invalid choice: 'byte'"),
    (["ngram", "--data", "{corpus}", "--order", "0"], "ok", 1, r"order=0 is not a valid n-gram order"),
    (["ngram", "--data", "{corpus}", "--order", "1000"], "ok", 1, r"from 1 to 10"),
    (["ngram", "--order", "2.5"], None, 2, r"--order: invalid int value: '2\.5'"),
    (["ngram", "--data", "{corpus}", "--smoothing", "addk", "--k", "inf"], "ok", 1, r"k=inf must be a finite"),
    (["ngram", "--data", "{corpus}", "--smoothing", "addk", "--k", "nan"], "ok", 1, r"k=nan must be a finite"),
    (["ngram", "--data", "{corpus}", "--smoothing", "addk", "--k", "-1"], "ok", 1, r"k=-1\.0 must be .* > 0"),
    (["ngram", "--data", "{corpus}", "--smoothing", "addk", "--k", "0"], "ok", 1, r"k=0\.0 must be .* > 0"),
    (["ngram", "--smoothing", "witten-bell"], None, 2, r"--smoothing: invalid choice"),
    (["ngram", "--mode", "document"], None, 2, r"--mode: invalid choice"),
    ([], None, 2, r"required: command"),
    (["train-everything"], None, 2, r"invalid choice: 'train-everything'"),
    (["data", "--colour"], None, 2, r"unrecognized arguments: --colour"),
]


@pytest.mark.parametrize("argv, kind, status, pattern", CLI_CASES,
                         ids=[" ".join(c[0]).replace("{corpus}", c[1] or "") or "nothing" for c in CLI_CASES])
def test_command_line_errors_are_one_sentence(home, capsys, argv, kind, status, pattern):
    corpus = _corpus_folder(home, kind) if kind else ""
    before = files_under(home)
    code, out, err = cli(capsys, [a.replace("{corpus}", corpus) for a in argv])
    assert code == status
    assert err.startswith("error: ") and out == ""
    assert_one_sentence(err, pattern)
    assert files_under(home) == before
    assert sorted(p.name for p in (home / "data").iterdir()) == []  # not even an empty corpus folder


def test_checksum_mismatch_on_disk_is_one_sentence_and_the_file_is_kept(home, capsys):
    folder = home / "data" / "ptb"
    folder.mkdir()
    for name in download.SOURCES["ptb"]:
        (folder / name).write_text("the cat sat\n")
    before = files_under(home)
    code, _, err = cli(capsys, ["data", "--data", "ptb"])
    assert code == 1
    assert_one_sentence(err, r"ptb/train\.txt is not the published file \(expected sha256 [0-9a-f]{64}, got "
                             r"[0-9a-f]{64}\): delete it")
    assert files_under(home) == before


def test_checksum_mismatch_from_every_mirror_is_one_sentence(home, capsys, monkeypatch):
    def wrong_bytes(url, out, progress):
        out.write(b"an error page\n")
    monkeypatch.setattr(download, "_stream", wrong_bytes)
    code, _, err = cli(capsys, ["data", "--data", "tinyshakespeare", "--level", "char"])
    assert code == 1
    assert_one_sentence(err, r"checksum mismatch for input\.txt")
    assert files_under(home) == {} and list((home / "data").iterdir()) == []


@pytest.mark.parametrize("command", ["data", "ngram"])
def test_data_and_ngram_follow_lmcourse_dataset(home, capsys, monkeypatch, command):
    monkeypatch.setenv("LMCOURSE_DATASET", "no-such-corpus")
    code, _, err = cli(capsys, [command])
    assert code == 2  # an unusable LMCOURSE_* setting, as the command line's help promises
    assert_one_sentence(err, r"LMCOURSE_DATASET='no-such-corpus' is not a corpus: set it to one of embedded, ptb")
    monkeypatch.setenv("LMCOURSE_DATASET", str(write_corpus(home / "mine")))
    code, out, _ = cli(capsys, [command, "--order", "2"] if command == "ngram" else [command])
    assert code == 0 and '"data": "mine"' in out.splitlines()[-1]


@pytest.mark.parametrize("variable, value, pattern", [
    ("LMCOURSE_DATASET", "bogus", r"LMCOURSE_DATASET='bogus' is not a corpus: set it to one of embedded, ptb, "
                                  r"wikitext-2, tinyshakespeare or to a folder holding train\.txt, valid\.txt and "
                                  r"test\.txt, or unset it"),
    ("LMCOURSE_DATASET", "{file}", r"LMCOURSE_DATASET=.*notes\.txt' is not a corpus"),
    ("LMCOURSE_DIST_TIMEOUT", "abc", r"LMCOURSE_DIST_TIMEOUT='abc' is not a number of seconds > 0: set it to, say, "
                                     r"600, or unset it for 300"),
    ("LMCOURSE_DIST_TIMEOUT", "0", r"LMCOURSE_DIST_TIMEOUT='0' is not a number of seconds > 0"),
    ("LMCOURSE_DIST_TIMEOUT", "-5", r"LMCOURSE_DIST_TIMEOUT='-5' is not a number of seconds > 0"),
    ("LMCOURSE_DIST_TIMEOUT", "inf", r"LMCOURSE_DIST_TIMEOUT='inf' is not a number of seconds > 0"),
    ("LMCOURSE_SCALE", "banana", r"LMCOURSE_SCALE='banana' is not a scale: set it to one of ci, cpu, gpu"),
    ("LMCOURSE_SCALE", "CPU", r"LMCOURSE_SCALE='CPU' is not a scale"),
    ("LMCOURSE_CACHE", "{file}", r"LMCOURSE_CACHE=.*notes\.txt is a file, not a folder"),
    ("LMCOURSE_CACHE", "{file}/cache", r"LMCOURSE_CACHE=.*notes\.txt/cache lies under .*notes\.txt, which is a file"),
    ("LMCOURSE_DATA", "{file}", r"LMCOURSE_DATA=.*notes\.txt is a file, not a folder"),
])
@pytest.mark.parametrize("argv", [["--help"], ["data", "--data", "ptb"]])
def test_unusable_settings_are_one_sentence_even_for_help(home, capsys, monkeypatch, variable, value, pattern, argv):
    (home / "notes.txt").write_text("keep me\n")
    monkeypatch.setenv(variable, value.replace("{file}", str(home / "notes.txt")))
    before = files_under(home)
    code, out, err = cli(capsys, argv)
    assert code == 2 and out == ""
    assert_one_sentence(err, pattern)
    assert files_under(home) == before


def test_no_writable_home_or_repository_folder_says_set_lmcourse_cache(home, capsys, monkeypatch):
    (home / "notes.txt").write_text("keep me\n")
    monkeypatch.delenv("LMCOURSE_CACHE")
    monkeypatch.delenv("LMCOURSE_DATA")
    monkeypatch.setattr(config, "REPO_DATA", home / "notes.txt" / "data")  # cannot be made
    monkeypatch.setenv("HOME", str(home / "notes.txt"))  # ~/.cache cannot be made either
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    before = files_under(home)
    code, _, err = cli(capsys, ["data"])
    assert code == 2
    assert_one_sentence(err, r"can be written to: set LMCOURSE_CACHE to a writable folder")
    assert files_under(home) == before


@pytest.mark.parametrize("raised, status, pattern", [
    (KeyboardInterrupt(), 130, r"interrupted; .*nothing half-written"),
    (RuntimeError("boom"), 1, r"unexpected RuntimeError \(boom\): run again with --debug"),
    (PermissionError(13, "Permission denied", "/srv/corpus/train.txt"), 1,
     r"Permission denied \(/srv/corpus/train\.txt\): check the path"),
    (KeyError("The token 'zebra' is not in the vocabulary of 6 tokens."), 1, r"^error: The token 'zebra'"),
    (MemoryError(), 1, r"unexpected MemoryError \(MemoryError\)"),
])
def test_anything_raised_inside_a_command_is_one_line(home, capsys, monkeypatch, raised, status, pattern):
    def fail(*args, **kwargs):
        raise raised
    monkeypatch.setattr(data, "load_corpus", fail)
    code, out, err = cli(capsys, ["data", "--data", "ptb"])
    assert code == status and out == ""
    assert_one_sentence(err, pattern)


def test_debug_adds_the_traceback(home, capsys):
    code, _, err = cli(capsys, ["data", "--data", "penn-treebank", "--debug"])
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[0].startswith("Traceback") and "CorpusError" in err
    assert_one_sentence(lines[-1], r"^error: Unknown corpus")


def _python(args, env_updates, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMCOURSE_")}
    env.update(HOME=str(tmp_path / "home"), LMCOURSE_CACHE=str(tmp_path / "cache"), CI="1",
               LMCOURSE_DATA=str(tmp_path / "data"), PYTHONPATH=str(REPO))
    env.update(env_updates)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("args, env_updates, status, pattern", [
    (["-m", "lmcourse", "--help"], {"LMCOURSE_SCALE": "banana"}, 2, r"LMCOURSE_SCALE='banana' is not a scale"),
    (["-m", "lmcourse", "data"], {"LMCOURSE_DATASET": "bogus"}, 2, r"LMCOURSE_DATASET='bogus' is not a corpus"),
    (["-m", "lmcourse", "data"], {"LMCOURSE_CACHE": "{file}/cache"}, 2, r"LMCOURSE_CACHE=.* which is a file"),
    (["-m", "lmcourse", "data", "--data", "ptb"], {}, 1, r"ptb/train\.txt is not the published file \(expected sha256"),
    (["-c", "import lmcourse; lmcourse.SCALE"], {"LMCOURSE_SCALE": "banana"}, 1,
     r"ConfigError: LMCOURSE_SCALE='banana' is not a scale"),
])
def test_in_a_fresh_process(tmp_path, args, env_updates, status, pattern):
    for name in ("home", "cache", "data/ptb"):
        (tmp_path / name).mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("keep me\n")
    for name, remote in download.SOURCES["ptb"].items():  # the right bytes would be needed: none are here
        (tmp_path / "data/ptb" / name).write_text("" if name != "test.txt" else "the cat\n")
    before = files_under(tmp_path)
    env = {k: v.replace("{file}", str(tmp_path / "notes.txt")) for k, v in env_updates.items()}
    run = _python(args, env, tmp_path)
    assert run.returncode == status, run.stderr
    assert re.search(pattern, run.stderr), run.stderr
    if args[0] == "-m":
        assert run.stdout == ""
        assert_one_sentence(run.stderr, pattern)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("variable", ["LMCOURSE_SCALE", "LMCOURSE_DATASET"])
def test_a_bad_setting_does_not_stop_the_import(tmp_path, variable):
    run = _python(["-c", "import lmcourse, lmcourse.corpora.data, lmcourse.ngram.model; print('imported')"],
                  {variable: "banana"}, tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "imported", run.stderr


@pytest.mark.parametrize("variable, value, pattern", [
    ("LMCOURSE_DATASET", "bogus", r"ConfigError: LMCOURSE_DATASET='bogus' is not a corpus"),
    ("LMCOURSE_DATASET", "{empty}", r"ConfigError: LMCOURSE_DATASET='.*empty' is not a corpus"),
    ("LMCOURSE_SCALE", "banana", r"ConfigError: LMCOURSE_SCALE='banana' is not a scale"),
])
def test_a_bad_setting_stops_a_lessons_first_cell(tmp_path, variable, value, pattern):
    (tmp_path / "empty").mkdir()  # a folder without the three splits
    first_cell = "import lmcourse\nfrom lmcourse.config import SCALE, DATASET, by_scale\nprint('ran')\n"
    run = _python(["-c", first_cell], {variable: value.replace("{empty}", str(tmp_path / "empty"))}, tmp_path)
    assert run.returncode == 1 and "ran" not in run.stdout
    assert re.search(pattern, run.stderr.strip().splitlines()[-1]), run.stderr


def test_by_scale_and_scale_say_the_sentence(monkeypatch):
    monkeypatch.setenv("LMCOURSE_SCALE", "huge")
    with pytest.raises(ConfigError) as err:
        config.scale()
    assert_one_sentence(str(err.value), r"'huge' is not a scale")
    monkeypatch.delattr(config, "SCALE")  # as after an import with the bad value
    with pytest.raises(ConfigError, match="'huge' is not a scale"):
        config.by_scale(ci=1, cpu=2, gpu=3)
    with pytest.raises(ConfigError, match="'huge' is not a scale"):
        config.SCALE


# -------------------------------------------------------------------------------- train's settings


@pytest.mark.parametrize("setting, pattern", [
    ("train_tokens=-5", r"train_tokens must be a positive whole number of tokens, or none for the whole split, got -5"),
    ("valid_tokens=-100", r"valid_tokens must be a positive whole number of tokens.*got -100"),
    ("test_tokens=0", r"test_tokens must be a positive whole number"),
    ("lr_decay=inf", r"TrainConfig\.lr_decay must be a finite number >= 1 \(1 keeps the rate\), got inf"),
    ("lr_decay=nan", r"TrainConfig\.lr_decay must be a finite number >= 1"),
    ("init_range=inf", r"LMConfig\.init_range must be a finite number > 0, got inf"),
    ("clip=inf", r"TrainConfig\.clip must be a finite number >= 0, got inf"),
    ("seed=-1", r"TrainConfig\.seed must be a whole number from 0 to 2147483647, got -1"),
    ("head=foo", r"LMConfig\.head='foo' is unknown: use one of mos, softmax"),
    ("last_size=-4", r"LMConfig\.last_size must be a positive integer or None, got -4"),
    ("hidden_size=100000000", r"The model has about [0-9,]+ parameters, [0-9,.]+ GB of weights before any gradient, "
                              r"more than the [0-9,.]+ GB of memory of this machine: lower hidden_size, emb_size or "
                              r"num_layers"),
    ("hidden_size=1e8", r"The model has about [0-9,]+ parameters, [0-9,.]+ GB of weights before any gradient"),
    ("train_tokens=1.5", r"--set train_tokens=1\.5: train_tokens takes a whole number or none, and '1\.5' is not one"),
    ("seed=abc", r"--set seed=abc: seed takes a whole number, and 'abc' is not one"),
    ("lr=nan", r"TrainConfig\.lr must be a finite number >= 0, got nan"),
    ("epochs=0", r"TrainConfig\.epochs must be a positive integer, got 0"),
])
def test_settings_out_of_range_stop_before_anything_is_written(home, capsys, setting, pattern):
    corpus = small_corpus(home / "mine")
    before = files_under(home)
    code, out, err = cli(capsys, train_argv(corpus, home / "run", "--set", setting))
    assert code == 1 and out == ""
    assert_one_sentence(err, pattern)
    assert files_under(home) == before and not (home / "run").exists()


@pytest.mark.parametrize("argv, status, pattern", [
    (["--out", ""], 2, r"argument --out: invalid folder path \(not empty\) value: ''"),
    (["--out", "  "], 2, r"argument --out: invalid folder path \(not empty\) value: ' *'"),
    (["--from", "{home}/elsewhere"], 1, r"--from names the trained run a finetuning preset starts from, and "
                                        r"pytorch-examples trains from scratch: drop --from"),
])
def test_train_options_that_would_be_ignored_are_refused(home, capsys, argv, status, pattern):
    corpus = small_corpus(home / "mine")
    before = files_under(home)
    code, _, err = cli(capsys, train_argv(corpus, home / "run")[:-4] + [a.replace("{home}", str(home)) for a in argv])
    assert code == status
    assert_one_sentence(err, pattern)
    assert files_under(home) == before and not (home / "runs").exists()


def test_tune_on_alone_is_refused(home, capsys, trained):
    run = copy_run(trained, home)
    code, _, err = cli(capsys, ["evaluate", str(run), "--tune-on", "valid"])
    assert code == 1
    assert_one_sentence(err, r"--tune-on valid tunes the settings of the cache and of dynamic evaluation: add --cache "
                             r"and/or --dyneval")


# ------------------------------------------------------------------- evaluate and the run it reads


def test_evaluate_refuses_a_best_pt_of_another_model(home, capsys, trained):
    run = copy_run(trained, home)
    corpus = data.load_corpus(trained[0], cache=False)
    settings = json.loads((run / "config.json").read_text())["model"]
    wider = RNNLM(LMConfig(**{**settings, "hidden_size": 24}))  # the run's model, but wider
    save_checkpoint(run / "best.pt", wider, corpus.vocab)
    before = files_under(home)
    for target in (run, run / "best.pt"):
        code, out, err = cli(capsys, ["evaluate", str(target)])
        assert code == 1 and out == ""
        assert_one_sentence(err, r"best\.pt holds a model with hidden_size=24, but the run in .*run trained one with "
                                 r"hidden_size=16 \(its config\.json\): evaluate the run's own best\.pt")
    assert files_under(home) == before


def test_evaluate_of_a_checkpoint_inside_a_run_reads_that_run_s_corpus(home, capsys, trained):
    run = copy_run(trained, home)
    code, out, err = cli(capsys, ["evaluate", str(run)])
    assert code == 0, err
    whole = json.loads(out.splitlines()[-1])
    code, out, err = cli(capsys, ["evaluate", str(run / "best.pt")])
    assert code == 0, err
    inside = json.loads(out.splitlines()[-1])
    assert inside["data"] == whole["data"] == "mine" and inside["preset"] == "pytorch-examples"
    assert (inside["valid_ppl"], inside["test_ppl"]) == (whole["valid_ppl"], whole["test_ppl"])


def _edit(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


EDITS = [  # (file, edit, pattern): evaluate reads preset.json and config.json; train --resume reads preset.json
    # and history.json (and writes config.json again from last.pt)
    ("preset.json", lambda r: r["settings"].update(lr="fast"),
     r"preset\.json was changed by hand, so the run it describes is unknown \(TrainConfig\.lr must be a finite "
     r"number >= 0, got 'fast'\): restore it"),
    ("preset.json", lambda r: r.update(preset="nope"),
     r"preset\.json was changed by hand.*\(there is no preset 'nope'\)"),
    ("preset.json", lambda r: r.update(settings=[]), r"\(its 'settings' entry is missing or malformed\)"),
    ("preset.json", lambda r: r["settings"].update(train_tokens=[1, 2]),
     r"\(train_tokens must be a positive whole number of tokens"),
    ("preset.json", lambda r: r["settings"].update(flux=1), r"\(There is no setting 'flux': the settings are"),
    ("preset.json", lambda r: r["settings"].update(valid_tokens="abc"), r"\(valid_tokens must be a positive whole"),
    ("preset.json", lambda r: r.update(data=5), r"\(its 'data' entry is missing or malformed\)"),
    ("preset.json", lambda r: r.pop("data"), r"\(its 'data' entry is missing or malformed\)"),
    ("history.json", lambda r: r.update(rows="x"), r"history\.json is not the history a run wrote \(changed by "
                                                   r"hand\?\): restore it"),
    ("config.json", lambda r: r.update(model=[]), r"config\.json has a malformed 'model' entry \(edited by hand\?\): "
                                                  r"restore the file"),
    ("config.json", lambda r: r.update(world_size="two"), r"config\.json has a malformed 'world_size' entry"),
    ("config.json", lambda r: r["model"].update(hidden_size=99), r"best\.pt holds a model with hidden_size=16, but "
                                                                 r"the run in .* trained one with hidden_size=99"),
]


READS = {"evaluate": ("preset.json", "config.json"), "train --resume": ("preset.json", "history.json")}


EDIT_CASES = [(command, *edit) for command, names in READS.items() for edit in EDITS if edit[0] in names]


@pytest.mark.parametrize("command, name, change, pattern", EDIT_CASES,
                         ids=[f"{c[0]}, {c[1]} #{i}" for i, c in enumerate(EDIT_CASES)])
def test_a_hand_edited_run_record_is_one_sentence(home, capsys, trained, command, name, change, pattern):
    run = copy_run(trained, home)
    _edit(run / name, change)
    before = files_under(home)
    argv = ["evaluate", str(run)] if command == "evaluate" else train_argv(trained[0], run, "--resume")
    code, _, err = cli(capsys, argv)
    assert code == 1
    assert_one_sentence(err, pattern)
    assert files_under(home) == before


def test_a_hand_edited_config_json_is_one_sentence_for_load_run_config(tmp_path, trained):
    run = copy_run(trained, tmp_path)
    _edit(run / "config.json", lambda r: r["model"].update(flux_capacitor=1))
    with pytest.raises(RunDirError) as err:
        load_run_config(run)
    assert_one_sentence(str(err.value), r"config\.json holds settings that are not valid \(edited by hand\?\), .*"
                                        r"flux_capacitor.*: restore the file the run wrote")


@pytest.mark.parametrize("change", ["a line added to train.txt", "valid.txt edited", "train.txt lines reordered"])
def test_resume_refuses_a_folder_corpus_that_changed(home, capsys, trained, change):
    run = copy_run(trained, home)
    corpus = small_corpus(home / "mine")  # the same files as the run's...
    if change == "a line added to train.txt":  # ...then changed
        (corpus / "train.txt").write_text((corpus / "train.txt").read_text() + "w1 w2 w3\n")
    elif change == "valid.txt edited":
        (corpus / "valid.txt").write_text((corpus / "valid.txt").read_text().replace("w1 ", "w2 "))
    else:
        lines = (corpus / "train.txt").read_text().splitlines()
        (corpus / "train.txt").write_text("\n".join(lines[::-1]) + "\n")
    shutil.copy(trained[1] / "preset.json", run / "preset.json")
    _edit(run / "preset.json", lambda r: r.update(data=str(corpus)))
    before = files_under(home)
    code, _, err = cli(capsys, train_argv(corpus, run, "--resume", "--set", "epochs=2"))
    assert code == 1
    assert_one_sentence(err, r"The corpus .*mine is not the one the run in .*run started on \(its tokens changed "
                             r"since\): resume with the files it was trained on, or start afresh with --overwrite")
    assert files_under(home) == before


# ------------------------------------------------------------------ issue 42: each unclear case in one true sentence


@pytest.mark.parametrize("setting, given", [("lr=-1", "-1.0"), ("clip=-1", "-1.0")])
def test_a_refused_setting_is_named_as_the_user_gave_it(home, capsys, setting, given):
    """Issue 42, unclear: `--set lr=-1` on a preset whose loss sums over time reported "got -35.0" (lr x bptt)."""
    code, _, err = cli(capsys, ["train", "--preset", "zaremba-medium", "--scale", "ci", "--data",
                                str(small_corpus(home / "mine")), "--out", str(home / "run"), "--set", setting])
    assert code == 1
    assert_one_sentence(err, rf"TrainConfig\.{setting.split('=')[0]} must be a finite number >= 0, got {given}\.$")


def test_a_rate_of_zero_is_refused_before_scores_of_weights_never_saved(home, capsys):
    """Issue 42, unclear: lr=0 exited 0 with scores of starting weights that were never saved."""
    code, out, err = cli(capsys, train_argv(small_corpus(home / "mine"), home / "run", "--set", "lr=0"))
    assert code == 1 and "valid_ppl" not in out
    assert_one_sentence(err, r"lr=0 never changes the weights, so the run would only score the weights it started "
                             r"from: give a rate > 0")
    assert not (home / "run").exists()


def test_a_run_that_never_beat_its_starting_weights_says_whose_scores_it_prints(home, capsys, monkeypatch):
    from lmcourse.training import trainer as trainer_module

    monkeypatch.setattr(trainer_module.Trainer, "_keep_best", lambda self, row: None)  # no epoch is ever the best
    code, out, err = cli(capsys, train_argv(small_corpus(home / "mine"), home / "run"))
    assert code == 0 and not (home / "run" / "best.pt").exists()
    assert_one_sentence(err.strip().removeprefix("note: "), r"no epoch of the run in .*run did better on the "
                                                             r"validation text than the weights it started from "
                                                             r"\(valid ppl [0-9.]+\), so no best\.pt was saved and the "
                                                             r"scores below are those of the starting weights")


def test_a_word_lstm_that_diverged_is_not_reported_as_trained(home, capsys, monkeypatch):
    """Issue 42, unclear: a word-lstm run that diverged printed "(trained)" with "epochs": 0 and exited 0."""
    from lmcourse.course.runs import word_lstm
    from lmcourse.store.stored_runs import CachedRun

    monkeypatch.setattr(word_lstm, "train", lambda corpus, *a, **k: CachedRun(
        word_lstm.fresh(word_lstm.word_lstm("ci")[1], corpus.vocab), [], False, None, "nan"))
    code, out, err = cli(capsys, ["word-lstm", "--scale", "ci", "--data", str(small_corpus(home / "mine"))])
    assert code == 1 and "(trained)" not in out and "valid_ppl" not in out
    assert_one_sentence(err, r"The word LSTM's training diverged \(stop reason 'nan'\) after 0 finished epochs, so it "
                             r"has no trained weights to score")


def test_min_count_that_makes_most_tokens_unk_says_so(home, capsys):
    """Issue 42, unclear: `--min-count 1000000` on PTB printed "valid ppl 1.20" with no word that 90% of the tokens
    had become <unk>."""
    corpus = small_corpus(home / "mine")
    for command in ("ngram", "data"):
        code, out, err = cli(capsys, [command, "--data", str(corpus), "--min-count", "1000000"])
        assert code == 0
        assert_one_sentence(err.strip().removeprefix("note: "), r"^--min-count 1000000 read [0-9.]+% of the training "
                                                                r"tokens and [0-9.]+% of the validation tokens as "
                                                                r"<unk>, .*so lower --min-count")
    code, out, err = cli(capsys, ["ngram", "--data", str(corpus)])
    assert code == 0 and "min-count" not in err


def test_the_last_line_is_strict_json_even_for_an_infinite_perplexity(home, capsys):
    """Issue 42, unclear: the last JSON line could hold `Infinity`, which is not JSON."""
    corpus = write_corpus(home / "mine", train="the cat sat\n", valid="the sat cat\n", test="cat the sat\n")
    code, out, err = cli(capsys, ["ngram", "--data", str(corpus), "--order", "2", "--smoothing", "mle"])
    assert code == 0
    result = json.loads(out.splitlines()[-1], parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert result["valid_ppl"] is None and result["test_ppl"] is None
    assert_one_sentence(err.strip().removeprefix("note: "), r"valid_ppl \(inf\), test_ppl \(inf\) are not finite "
                                                            r"numbers, which JSON cannot hold")


def test_train_into_a_pipe_that_closes_says_why_it_stopped(home):
    """Issue 42, unclear: `train | head` stopped training with nothing on stderr."""
    corpus = small_corpus(home / "mine")
    run = subprocess.Popen([sys.executable, "-m", "lmcourse", *train_argv(corpus, home / "run", "--set", "epochs=3")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_child_env(home), cwd=home)
    first = run.stdout.readline()  # the header line, as `| head -1` reads it
    run.stdout.close()
    err = run.stderr.read().decode()
    run.wait(timeout=300)
    assert first and run.returncode == 1
    assert_one_sentence(err.strip().splitlines()[-1].removeprefix("error: "), r"^the output pipe closed \(as `\| head` "
                                                                           r"does once it has read enough lines\), so "
                                                                           r"the command stopped there")


@pytest.mark.parametrize("variable, value, pattern", [
    ("LMCOURSE_SCALE", "banana", r"^ConfigError: LMCOURSE_SCALE='banana' is not a scale"),
    ("LMCOURSE_CACHE", "{file}", r"^ConfigError: LMCOURSE_CACHE=.*cache is a file, not a folder"),
])
def test_a_setting_a_lesson_cannot_use_stops_its_first_cell_in_one_line(tmp_path, variable, value, pattern):
    """Issue 42, unclear: notebooks stopped with the sentence at the end of a ConfigError traceback, and with a file
    (or a read-only folder) as the cache they stopped in the corpus cell rather than the first."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    (tmp_path / "cache").write_text("not a folder\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import lmcourse\nfrom lmcourse.config import SCALE, DATASET, by_scale"),
                nbformat.v4.new_code_cell("from lmcourse.corpora.data import load_corpus\nload_corpus()")]
    env = dict(child_env(), **{variable: value.replace("{file}", str(tmp_path / "cache"))})
    with pytest.raises(CellExecutionError):
        NotebookClient(nb, kernel_name="python3", timeout=300).execute(env=env, cwd=str(tmp_path))
    error, = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert len(error.traceback) == 1 and re.search(pattern, error.traceback[0]), error.traceback
    assert_one_sentence(error.traceback[0], pattern)
    assert not nb.cells[1].outputs
