"""Bad and edge inputs, the way a careless user or a hostile file would give them.

Each case asserts three things: the exit status (command line) or the exception type (library);
one sentence naming what was wrong and what to do, never a traceback; and that nothing was
written or lost (the files under the test's folders are exactly what they were).
"""
import contextlib
import errno
import hashlib
import json
import math
import os
import pickle
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmcourse import checksum, config, errors
from lmcourse.cli.main import main
from lmcourse.corpora import data, download
from lmcourse.corpora.download import Remote
from lmcourse.adapt.dyneval import DynamicEval
from lmcourse.errors import (
    CheckpointError,
    ConfigError,
    CorpusError,
    LMCourseError,
    MissingFileError,
    NoSpaceError,
    RunDirError,
    WriteError,
)
from lmcourse.lm import perplexity
from lmcourse.networks.generate import beam_search, sample, sampling_distribution
from lmcourse.networks.models import RNNLM, LMConfig, count_parameters
from lmcourse.ngram.model import NGramLM
from lmcourse.training import checkpoint
from lmcourse.training.checkpoint import check_writable, load_checkpoint, save_checkpoint
from lmcourse.training.rundir import LOCK, RunDir
from lmcourse.training.trainer import TrainConfig, Trainer, load_run_config
from lmcourse.vocab import Vocab

REPO = Path(__file__).resolve().parents[1]
WORDS = ["the", "cat", "sat", "on", "mat", "<eos>"]


# ----------------------------------------------------------------------------------- helpers


def files_under(*folders) -> dict:
    """Every file under ``folders`` with its sha256: equal snapshots mean nothing written or lost."""
    out = {}
    for folder in folders:
        for p in Path(folder).rglob("*"):
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_one_sentence(message: str, pattern: str) -> None:
    text = message.strip()
    assert "Traceback" not in text and "\n" not in text, f"not one line: {message!r}"
    assert text.endswith("."), f"not a sentence: {text!r}"
    assert re.search(pattern, text), f"{pattern!r} not in {text!r}"
    assert "weights_only=False" not in text


def write_corpus(folder: Path, train="the cat sat\non the mat\n", valid="the cat\n", test="a cat sat\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in (("train", train), ("valid", valid), ("test", test)):
        (folder / f"{split}.txt").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def closed_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/file.txt"


@pytest.fixture
def home(tmp_path, monkeypatch, closed_url):
    """A fresh HOME, cache and data folder; no network (every mirror is a closed local port)."""
    folders = {name: tmp_path / name for name in ("home", "cache", "data")}
    for folder in folders.values():
        folder.mkdir()
    monkeypatch.setenv("HOME", str(folders["home"]))
    monkeypatch.setenv("LMCOURSE_CACHE", str(folders["cache"]))
    monkeypatch.setenv("LMCOURSE_DATA", str(folders["data"]))
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("LMCOURSE_DATASET", raising=False)
    monkeypatch.delenv("LMCOURSE_SCALE", raising=False)
    monkeypatch.setattr(download, "TIMEOUT_S", 2)
    offline = {name: {f: Remote(r.sha256, (closed_url,)) for f, r in files.items()}
               for name, files in download.SOURCES.items()}
    monkeypatch.setattr(download, "SOURCES", offline)
    return tmp_path


def cli(capsys, argv) -> tuple:
    """Run ``python -m lmcourse argv`` in this process: (exit status, stdout, stderr)."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------ the command line

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
        Path(out).write_bytes(b"an error page\n")
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


# ------------------------------------------------------------------------------ corpora

@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"min_count": 0}, ValueError, r"min_count must be at least 1, got 0"),
    ({"min_count": 2.5}, TypeError, r"min_count must be a whole number, got float"),
    ({"min_count": True}, TypeError, r"min_count must be a whole number"),
    ({"min_count": 2, "level": "char"}, ValueError, r"applies to words: leave it at 1"),
    ({"level": "bytes"}, ValueError, r"level='bytes' is not a level"),
])
def test_load_corpus_arguments(tmp_path, kwargs, error, pattern):
    folder = write_corpus(tmp_path / "c")
    before = files_under(tmp_path)
    with pytest.raises(error) as err:
        data.load_corpus(folder, cache=False, **kwargs)
    assert_one_sentence(str(err.value), pattern)
    assert files_under(tmp_path) == before


def test_a_data_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("keep me\n")
    before = files_under(tmp_path)
    with pytest.raises(CorpusError) as err:
        data.load_corpus("ptb", data_dir=tmp_path / "notes.txt")
    assert_one_sentence(str(err.value), r"data_dir=.*notes\.txt is a file, not a folder")
    assert files_under(tmp_path) == before


def test_min_count_with_a_closed_vocabulary_is_refused(tmp_path):
    folder = write_corpus(tmp_path / "c")
    (folder / "vocab.txt").write_text("\n".join(["the", "cat", "sat", "on", "mat", "a", "<eos>"]) + "\n")
    with pytest.raises(CorpusError) as err:
        data.load_corpus(folder, min_count=2, cache=False)
    assert_one_sentence(str(err.value), r"min_count=2 needs a vocabulary built from train\.txt")


def test_a_text_with_a_bom_and_crlf_reads_like_a_clean_one(tmp_path):
    clean = data.load_corpus(write_corpus(tmp_path / "clean"), cache=False)
    folder = write_corpus(tmp_path / "bom")
    (folder / "train.txt").write_bytes(b"\xef\xbb\xbfthe cat sat\r\non the mat\r\n")
    messy = data.load_corpus(folder, cache=False)
    assert messy.vocab == clean.vocab and torch.equal(messy.train, clean.train)


def test_editing_test_leaves_the_valid_perplexity_alone(tmp_path):
    """The defect behind a folder's vocabulary: it must not depend on valid or test."""
    def valid_ppl(test_text):
        corpus = data.load_corpus(write_corpus(tmp_path / str(len(test_text)), test=test_text), cache=False)
        return perplexity(NGramLM(corpus.vocab, 2, "kn").fit(corpus.train), corpus.valid)
    assert valid_ppl("a cat sat\n") == valid_ppl("zebras and okapis and quaggas graze here\n" * 30)


# ---------------------------------------------------------------------------- checkpoints

def tiny_model() -> RNNLM:
    torch.manual_seed(0)
    model = RNNLM(LMConfig(vocab_size=len(WORDS), emb_size=4, hidden_size=5, num_layers=1))
    model.vocab = Vocab(WORDS)
    return model


def _saved(path: Path, **changes) -> None:
    """A checkpoint whose payload was changed and sealed again: a checksum that matches, contents that do not fit."""
    model = tiny_model()
    save_checkpoint(path, model)
    payload = torch.load(path, weights_only=True)
    for key, value in changes.items():
        if value is ...:
            del payload[key]
        else:
            payload[key] = value(payload) if callable(value) else value
    torch.save(checksum.seal(payload), path)


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "code ran"))


def _damaged(path: Path, kind: str) -> None:
    if kind == "truncated":
        save_checkpoint(path, tiny_model())
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("hello world\n")
    elif kind == "exploit (torch.save)":
        torch.save({"format": 1, "config": Exploit(path.parent / "pwned")}, path)
    elif kind == "exploit (pickle)":
        path.write_bytes(pickle.dumps(Exploit(path.parent / "pwned")))
    elif kind == "no format mark":
        torch.save({"weights": torch.zeros(3)}, path)
    elif kind == "a bare tensor":
        torch.save(torch.zeros(3), path)
    elif kind == "vocab missing":
        _saved(path, vocab=...)
    elif kind == "vocab too short":
        _saved(path, vocab=WORDS[:3])
    elif kind == "vocab of numbers":
        _saved(path, vocab=list(range(len(WORDS))))
    elif kind == "vocab repeats":
        _saved(path, vocab=WORDS[:-1] + ["the"])
    elif kind == "config invalid":
        _saved(path, config=lambda p: {**p["config"], "hidden_size": -5})
    elif kind == "config unknown field":
        _saved(path, config=lambda p: {**p["config"], "flux_capacitor": 1})
    elif kind == "config asks for a huge model":
        _saved(path, config=lambda p: {**p["config"], "vocab_size": 10**12}, vocab=None)
    elif kind == "weights of another shape":
        _saved(path, state_dict=lambda p: {**p["state_dict"], "embedding.weight": torch.zeros(2, 2)})
    elif kind == "a weight missing":
        _saved(path, state_dict=lambda p: {k: v for k, v in p["state_dict"].items() if "embedding" not in k})
    elif kind == "history not a list":
        _saved(path, history="epoch 1")


DAMAGED = [
    ("truncated", r"damaged or is not an lmcourse checkpoint \(reading it failed with RuntimeError\)"),
    ("empty", r"reading it failed with EOFError\): train the model again"),
    ("text", r"reading it failed with KeyError"),
    ("exploit (torch.save)", r"holds objects other than tensors and plain data, which are never loaded"),
    ("exploit (pickle)", r"holds objects other than tensors and plain data"),
    ("no format mark", r"lacks the format mark of save_checkpoint"),
    ("a bare tensor", r"lacks the format mark"),
    ("vocab missing", r"its 'vocab' entry is missing or malformed"),
    ("vocab too short", r"its vocabulary has 3 tokens for a model of 6"),
    ("vocab of numbers", r"its vocabulary is not a list of distinct strings"),
    ("vocab repeats", r"not a list of distinct strings"),
    ("config invalid", r"its model settings are invalid: LMConfig\.hidden_size must be a positive integer"),
    ("config unknown field", r"its model settings are invalid: .*flux_capacitor"),
    ("config asks for a huge model", r"its weights do not fit its model settings, first at 'embedding\.weight'"),
    ("weights of another shape", r"its weights do not fit its model settings, first at 'embedding\.weight'"),
    ("a weight missing", r"its weights do not fit .* 'embedding\.weight'"),
    ("history not a list", r"its 'history' entry is missing or malformed"),
]


@pytest.mark.parametrize("kind, pattern", DAMAGED, ids=[k for k, _ in DAMAGED])
def test_a_damaged_or_hostile_checkpoint_is_one_sentence(tmp_path, kind, pattern):
    path = tmp_path / "model.pt"
    _damaged(path, kind)
    before = files_under(tmp_path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, map_location="cpu")
    assert_one_sentence(str(err.value), pattern)
    assert str(path) in str(err.value) and "weights_only" not in str(err.value)
    context = err.value.__context__  # torch's own message (and its advice) is not shown with ours
    assert err.value.__cause__ is None and (context is None or err.value.__suppress_context__)
    assert files_under(tmp_path) == before and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("vocab, saved_with_vocab, pattern", [
    (Vocab(WORDS[::-1]), True, r"differs from the one given .* first at id 0 \('the' vs '<eos>'\)"),
    (Vocab(WORDS + ["dog"]), True, r"\(6 tokens\) differs from the one given \(7 tokens\)"),
    (Vocab(WORDS[:4] + ["<eos>"]), False, r"has 5 tokens but the model in .* has 6"),
])
def test_a_vocabulary_that_does_not_fit_is_refused(tmp_path, vocab, saved_with_vocab, pattern):
    path = tmp_path / "model.pt"
    if saved_with_vocab:
        save_checkpoint(path, tiny_model())
    else:
        _saved(path, vocab=None)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, vocab=vocab, map_location="cpu")
    assert_one_sentence(str(err.value), pattern)


@pytest.mark.parametrize("make, error, pattern", [
    (lambda d: d / "nothing.pt", MissingFileError, r"No checkpoint at .*nothing\.pt: train a model"),
    (lambda d: d, CheckpointError, r"is a folder, not a checkpoint file"),
])
def test_a_missing_path_or_a_folder_is_one_sentence(tmp_path, make, error, pattern):
    with pytest.raises(error) as err:
        load_checkpoint(make(tmp_path))
    assert_one_sentence(str(err.value), pattern)
    assert isinstance(err.value, LMCourseError)


@pytest.mark.parametrize("where, pattern", [
    (lambda d: d / "notes.txt" / "model.pt", r"notes\.txt is a file, so nothing can be saved under it"),
    (lambda d: d / "notes.txt" / "deeper" / "model.pt", r"notes\.txt is a file"),
    (lambda d: d / "runs", r"runs is a folder: give the checkpoint a file name"),
])
@pytest.mark.parametrize("call", ["check_writable", "save_checkpoint"])
def test_an_unwritable_checkpoint_path_is_refused_before_anything_is_written(tmp_path, where, pattern, call):
    (tmp_path / "notes.txt").write_text("keep me\n")
    (tmp_path / "runs").mkdir()
    before = files_under(tmp_path)
    with pytest.raises(CheckpointError) as err:
        check_writable(where(tmp_path)) if call == "check_writable" else save_checkpoint(where(tmp_path), tiny_model())
    assert_one_sentence(str(err.value), pattern)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("vocab, pattern", [
    (Vocab(WORDS[:4]), r"The vocabulary to save is 4 tokens, but the model has vocab_size=6"),
    (WORDS, r"The vocabulary to save is a list, but"),
])
def test_saving_with_a_vocabulary_that_does_not_fit_is_refused(tmp_path, vocab, pattern):
    with pytest.raises(CheckpointError) as err:
        save_checkpoint(tmp_path / "model.pt", tiny_model(), vocab=vocab)
    assert_one_sentence(str(err.value), pattern)
    assert files_under(tmp_path) == {}


def test_a_checkpoint_path_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError) as err:
        load_checkpoint(None)
    assert_one_sentence(str(err.value), r"A checkpoint path must be a string or a Path, got NoneType")


def test_check_writable_leaves_no_probe_behind(tmp_path):
    assert check_writable(tmp_path / "a" / "model.pt") == tmp_path / "a" / "model.pt"
    assert list((tmp_path / "a").iterdir()) == [] and checkpoint.FORMAT == 2


# ----------------------------------------------------------------------- scoring and decoding

@pytest.fixture(scope="module")
def ngram():
    vocab = Vocab(WORDS)
    return NGramLM(vocab, 2, "kn").fit(vocab.encode("the cat sat on the mat <eos>".split() * 3))


@pytest.mark.parametrize("tokens, error, pattern", [
    (["the"], TypeError, r"got strings: encode the words first with the model's vocabulary"),
    ("the cat", TypeError, r"got strings: encode the words"),
    ([0, "cat"], TypeError, r"got strings"),
    (None, TypeError, r"Expected a 1-D tensor or list of integer token ids, got NoneType"),
    ({0, 1}, TypeError, r"got set"),
    ([2 ** 70], TypeError, r"integer token ids"),
    (torch.tensor([0.0, 1.0]), TypeError, r"Token ids must be integers, got torch\.float32"),
    (torch.tensor([True]), TypeError, r"must be integers, got torch\.bool"),
    (torch.zeros(2, 2, dtype=torch.long), ValueError, r"Expected a 1-D stream .* flatten it first"),
    ([0, 6], ValueError, r"Token id 6 is outside the vocabulary of 6"),
    ([-1, 0], ValueError, r"Token id -1 is outside the vocabulary"),
    ([], ValueError, r"The token stream is empty"),
])
def test_scoring_bad_tokens(ngram, tokens, error, pattern):
    with pytest.raises(error) as err:
        ngram.score(tokens)
    assert_one_sentence(str(err.value), pattern)


def test_perplexity_of_something_that_is_not_a_model():
    with pytest.raises(TypeError) as err:
        perplexity("kn5", torch.tensor([0, 1]))
    assert_one_sentence(str(err.value), r"a language model with a score\(tokens\) method, got str")


@pytest.mark.parametrize("call, error, pattern", [
    (lambda m: beam_search(m, length_penalty=math.nan), ValueError, r"length_penalty must be a finite number >= 0"),
    (lambda m: beam_search(m, length_penalty=math.inf), ValueError, r"length_penalty must be a finite number"),
    (lambda m: beam_search(m, length_penalty=True), ValueError, r"length_penalty"),
    (lambda m: sample(m, temperature=math.nan), ValueError, r"temperature must be >= 0"),
    (lambda m: sample(m, temperature=math.inf), ValueError, r"temperature must be >= 0"),
    (lambda m: sample(m, top_p=math.nan), ValueError, r"top_p must lie in \(0, 1\]"),
    (lambda m: sample(m, top_k=2.0), TypeError, r"top_k must be an integer"),
    (lambda m: sample(m, generator=0), TypeError, r"generator must be a torch\.Generator"),
    (lambda m: sample(m, seed=-1), ValueError, r"seed must be at least 0"),
    (lambda m: sample(m, "the zebra"), ValueError, r"'zebra' is not in the vocabulary"),
    (lambda m: sample("kn5"), TypeError, r"Expected a language model"),
])
def test_decoding_arguments(ngram, call, error, pattern):
    with pytest.raises(error) as err:
        call(ngram)
    assert_one_sentence(str(err.value), pattern)


def test_a_tiny_temperature_is_greedy_not_a_false_error():
    logp = torch.log_softmax(torch.tensor([[0.0, 2.0, 1.0]]), dim=-1)
    probs = sampling_distribution(logp, temperature=1e-310)  # log p / T overflows to -inf for every token
    assert torch.equal(probs, torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64))


@pytest.mark.parametrize("k", [math.inf, math.nan, -1.0, 0, "1", True])
def test_add_k_needs_a_finite_positive_k(k):
    with pytest.raises(ValueError) as err:
        NGramLM(Vocab(WORDS), 2, "addk", k=k)
    assert_one_sentence(str(err.value), r"must be a finite number > 0")


@pytest.mark.parametrize("call, error, pattern", [
    (lambda v: v.decode([-1]), ValueError, r"Token id -1 is outside the vocabulary of 6 tokens"),
    (lambda v: v.decode(torch.tensor([6])), ValueError, r"Token id 6 is outside"),
    (lambda v: v.decode(torch.tensor([1.0])), TypeError, r"must be integers, got torch\.float32"),
    (lambda v: v.encode("the cat"), TypeError, r"got one string: split it first"),
    (lambda v: v.encode(["the", "zebra"]), KeyError, r"The token 'zebra' is not in the vocabulary"),
    (lambda v: Vocab(["a", 1]), TypeError, r"Every token must be a non-empty string, got 1"),
    (lambda v: Vocab(["a", ""]), TypeError, r"non-empty string, got ''"),
    (lambda v: Vocab("the cat"), TypeError, r"got one string: split it first"),
    (lambda v: Vocab(["a", "a"]), ValueError, r"lists a token twice"),
])
def test_vocabulary_misuse(call, error, pattern):
    with pytest.raises(error) as err:
        call(Vocab(WORDS))
    assert_one_sentence(errors.sentence(err.value), pattern)


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"sigma": math.nan}, ValueError, r"sigma must be a finite number >= 0, got nan"),
    ({"sigma": math.inf}, ValueError, r"sigma must be a finite number"),
    ({"p": math.nan}, ValueError, r"p must be a finite number >= 0 and <= 1, got nan"),
    ({"p": 1.5}, ValueError, r"p must be a finite number >= 0 and <= 1, got 1\.5"),
    ({"bptt": 7.0}, TypeError, r"bptt must be a whole number, got float"),
])
def test_variable_bptt_arguments(kwargs, error, pattern):
    source = data.batchify(torch.arange(100), 2)
    with pytest.raises(error) as err:
        next(data.variable_bptt_batches(source, **{"bptt": 7, "generator": torch.Generator(), **kwargs}))
    assert_one_sentence(str(err.value), pattern)


# ------------------------------------------------------------------------------- downloads

@pytest.mark.parametrize("make, error, pattern", [
    (lambda d: (d / "notes.txt" / "f.txt", "0" * 64), download.DownloadError, r"notes\.txt is a file, not a folder"),
    (lambda d: (d / "runs", "0" * 64), download.DownloadError, r"runs is a folder, not a file"),
    (lambda d: (d / "f.txt", "abc"), ValueError, r"'abc' is not a sha256 digest"),
    (lambda d: (d / "f.txt", "g" * 64), ValueError, r"is not a sha256 digest: give the 64 hexadecimal digits"),
])
def test_download_destinations_and_digests(tmp_path, closed_url, make, error, pattern):
    (tmp_path / "notes.txt").write_text("keep me\n")
    (tmp_path / "runs").mkdir()
    dest, digest = make(tmp_path)
    before = files_under(tmp_path)
    with pytest.raises(error) as err:
        download.download([closed_url], dest, digest, progress=False)
    assert_one_sentence(str(err.value), pattern)
    assert files_under(tmp_path) == before


# ------------------------------------------------------------------ a run directory holds one run, whole

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
    assert main(train_argv(corpus, root / "run")) == 0
    return corpus, root / "run"


def copy_run(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained[1], tmp_path / "run"))


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMCOURSE_")}
    env.update(PYTHONPATH=str(REPO), CI="1")
    return env


HOLD = ("import sys; from lmcourse.training.rundir import RunLock; lock = RunLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); sys.stdin.read(); lock.release()")


@contextlib.contextmanager
def held_elsewhere(folder: Path):
    """Another process holding the lock of ``folder`` until the block ends; yields its pid."""
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=60)


@pytest.mark.parametrize("resume", [False, True], ids=["train", "train --resume"])
def test_a_second_run_on_a_folder_in_use_stops_at_once(home, capsys, trained, resume):
    out = copy_run(trained, home) if resume else home / "run"
    with held_elsewhere(out) as pid:
        before = files_under(home)
        argv = train_argv(trained[0], out, *(["--resume", "--set", "epochs=2"] if resume else []))
        code, _, err = cli(capsys, argv)
        assert code == 1
        assert_one_sentence(err, rf"run is in use by another run \(process {pid} on {re.escape(socket.gethostname())}"
                                 r", started [0-9-]+ [0-9:]+\): wait for it to end, or give this run another --out\.")
        assert files_under(home) == before
        m = tiny_model()
        cfg = TrainConfig(epochs=1, batch_size=2, eval_batch_size=2, out_dir=str(out), progress=False,
                          live_plot=False)
        with pytest.raises(RunDirError) as error:
            Trainer(m, torch.arange(40) % 6, torch.arange(20) % 6, cfg).fit(resume=resume)
        assert_one_sentence(str(error.value), r"is in use by another run .*another TrainConfig\.out_dir\.")
        assert files_under(home) == before
    assert not (out / LOCK).exists()  # the holder let go, and removed its lock file


def test_two_train_processes_started_together_leave_one_whole_run(home, trained):
    out = home / "run"
    runs = [subprocess.Popen([sys.executable, "-m", "lmcourse", *train_argv(trained[0], out, "--set", f"seed={seed}")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=home)
            for seed in (1, 2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    codes = [run.returncode for run in runs]
    assert sorted(codes) == [0, 1], outputs
    winner, loser = codes.index(0), codes.index(1)
    assert re.search(r"^error: .*run (is in use by another run|already holds)", outputs[loser][1]), outputs[loser][1]
    seed = (1, 2)[winner]  # every file is the winner's
    last = torch.load(out / "last.pt", weights_only=True)
    assert json.loads((out / "preset.json").read_text())["settings"]["seed"] == seed
    assert json.loads((out / "config.json").read_text())["train"]["seed"] == last["train_config"]["seed"] == seed
    assert last["history"]["rows"] == json.loads((out / "history.json").read_text())["rows"]
    assert not (out / LOCK).exists()


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_note(home, capsys, trained):
    out = home / "run"
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=child_env())
    assert child.stdout.readline().strip() == "held"
    child.kill()  # kill -9: no clean-up ran, the lock file stays
    child.wait(timeout=60)
    assert json.loads((out / LOCK).read_text())["pid"] == child.pid
    code, out_text, err = cli(capsys, train_argv(trained[0], out))
    assert code == 0, err
    assert re.search(rf"note: took over the lock of .*run, left by process {child.pid} on .*, which ended without "
                     r"releasing it\.", err), err
    assert not (out / LOCK).exists() and json.loads(out_text.splitlines()[-1])["epochs"] == 1


@pytest.mark.parametrize("how", ["completed", "error", "interrupted"])
def test_the_lock_is_released_on_any_exit(home, capsys, trained, monkeypatch, how):
    from lmcourse.training import trainer as trainer_module

    if how != "completed":
        def stop(self, *args, **kwargs):
            raise KeyboardInterrupt if how == "interrupted" else RuntimeError("boom")
        monkeypatch.setattr(trainer_module.Trainer, "_fit", stop)
    code, _, _ = cli(capsys, train_argv(trained[0], home / "run"))
    assert code == {"completed": 0, "error": 1, "interrupted": 130}[how]
    assert not (home / "run" / LOCK).exists()
    code, _, err = cli(capsys, train_argv(home / "nowhere", home / "other"))  # fails after the folder was claimed
    assert code == 1 and not (home / "other").exists()  # the empty folder the lock made is gone too


def _finished_without_last(run: Path) -> None:
    (run / "last.pt").unlink()  # deleting the big last.pt to save disk


def _own_best(run: Path) -> None:
    shutil.rmtree(run)
    run.mkdir()
    save_checkpoint(run / "best.pt", tiny_model())


def _only(name: str):
    def prepare(run: Path) -> None:
        for p in run.iterdir():
            if p.name != name:
                p.unlink()
    return prepare


@pytest.mark.parametrize("prepare, pattern", [
    (_finished_without_last, r"already holds files of an earlier run \(config\.json, history\.json, best\.pt, "
                             r"curves\.png and preset\.json\), which a new run would replace: start over with "
                             r"--overwrite, or choose another folder"),
    (_own_best, r"already holds files of an earlier run \(best\.pt\), which a new run would replace"),
    (_only("config.json"), r"already holds files of an earlier run \(config\.json\)"),
    (_only("history.json"), r"already holds files of an earlier run \(history\.json\)"),
    (_only("preset.json"), r"already holds files of an earlier run \(preset\.json\)"),
    (lambda run: None, r"already holds a run that can be continued: continue it with --resume, start over with "
                       r"--overwrite"),
], ids=["finished run, last.pt deleted", "a best.pt of your own", "config.json alone", "history.json alone",
        "preset.json alone", "a run that can be continued"])
def test_a_new_run_never_replaces_files_it_did_not_write(home, capsys, trained, prepare, pattern):
    run = copy_run(trained, home)
    prepare(run)
    before = files_under(home)
    code, _, err = cli(capsys, train_argv(trained[0], run))
    assert code == 1
    assert_one_sentence(err, pattern)
    assert files_under(home) == before
    code, out, err = cli(capsys, train_argv(trained[0], run, "--overwrite"))
    assert code == 0, err
    assert {p.name for p in run.iterdir()} == {"config.json", "history.json", "best.pt", "last.pt", "curves.png",
                                               "preset.json"}
    code, _, err = cli(capsys, train_argv(trained[0], run, "--overwrite", "--resume"))
    assert code == 2
    assert_one_sentence(err, r"argument --resume: not allowed with argument --overwrite")


def test_the_trainer_refuses_a_folder_with_files_of_another_run_unless_told_to_overwrite(tmp_path):
    save_checkpoint(tmp_path / "best.pt", tiny_model())
    before = files_under(tmp_path)
    cfg = TrainConfig(epochs=1, batch_size=2, eval_batch_size=2, out_dir=str(tmp_path), progress=False,
                      live_plot=False)
    stream = torch.arange(60) % 6
    for resume in (False, "auto"):
        with pytest.raises(RunDirError) as error:
            Trainer(tiny_model(), stream, stream[:30], cfg).fit(resume=resume)
        assert_one_sentence(str(error.value), r"already holds files of an earlier run \(best\.pt\), which a new run "
                                              r"would replace: start over with fit\(overwrite=True\)")
        assert files_under(tmp_path) == before
    with pytest.raises(ValueError) as error:
        Trainer(tiny_model(), stream, stream[:30], cfg).fit(resume=True, overwrite=True)
    assert_one_sentence(str(error.value), r"asks both to continue the run and to delete it")
    history = Trainer(tiny_model(), stream, stream[:30], cfg).fit(overwrite=True)
    assert len(history) == 1 and (tmp_path / "last.pt").is_file()


# ------------------------------------------------------------------ integrity of what is read back

def zero_inside(path: Path, tensor: torch.Tensor, n: int = 4096, at: float = 0.0) -> None:
    """Zero ``n`` bytes of ``tensor``'s data inside the file ``path`` (torch stores it uncompressed),
    starting a fraction ``at`` into it, or flip one bit there when ``n`` is 0."""
    raw = bytearray(path.read_bytes())
    data = tensor.contiguous().view(torch.uint8).numpy().tobytes()
    start = raw.find(data[:256])
    assert start >= 0 and raw.find(data[:256], start + 1) < 0, "the tensor's bytes are not in the file once"
    offset = start + int(at * (len(data) - 1))
    if n:
        raw[offset:offset + min(n, len(data))] = bytes(min(n, len(data)))
    else:
        raw[offset] ^= 0x10
    path.write_bytes(bytes(raw))


def record(path: Path, pickle_: bool = False) -> tuple:
    """(offset, size) inside the file of the zip record of the largest tensor, or of the pickle."""
    import struct
    import zipfile
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if i.filename.endswith("data.pkl") == pickle_), key=lambda i: i.file_size)
    raw = path.read_bytes()
    name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
    return info.header_offset + 30 + name_len + extra_len, info.file_size


@pytest.mark.parametrize("where", ["the weights", "the pickle"])
def test_a_flipped_bit_never_loads_as_another_model(tmp_path, where):
    """A flip in a tensor's bytes is always refused. A flip in the pickle is refused too, unless it only
    renumbers the unpickler's scratch memo or the device name, which leaves every loaded value as saved."""
    path = tmp_path / "model.pt"
    save_checkpoint(path, tiny_model())
    saved, _ = load_checkpoint(path, map_location="cpu")
    start, size = record(path, pickle_=where == "the pickle")
    refused = 0
    for at in range(start, start + size, 3):
        raw = bytearray(path.read_bytes())
        raw[at] ^= 0x08
        (tmp_path / "flipped.pt").write_bytes(bytes(raw))
        try:
            model, info = load_checkpoint(tmp_path / "flipped.pt", map_location="cpu")
        except CheckpointError as err:
            assert_one_sentence(str(err), r"flipped\.pt is damaged or is not an lmcourse checkpoint")
            refused += 1
            continue
        assert where == "the pickle", f"a flip at byte {at - start} of a tensor loaded"
        assert model.config == saved.config and list(info["vocab"].itos) == list(saved.vocab.itos)
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), saved.state_dict().values()))
    assert refused >= (size // 3 if where == "the weights" else 1)


def zero_4k(path: Path) -> None:
    """Zero 4 KiB in the middle of the largest record of the zip (the largest tensor's bytes)."""
    start, size = record(path)
    raw = bytearray(path.read_bytes())
    at = start + max(0, size // 2 - 2048)
    assert any(raw[at:at + 4096])
    raw[at:at + 4096] = bytes(len(raw[at:at + 4096]))
    path.write_bytes(bytes(raw))


def test_a_zeroed_block_inside_best_pt_is_refused_by_evaluate(home, capsys, trained):
    run = copy_run(trained, home)
    zero_4k(run / "best.pt")
    before = files_under(home)
    code, out, err = cli(capsys, ["evaluate", str(run)])
    assert code == 1 and out == ""
    assert_one_sentence(err, r"best\.pt is damaged or is not an lmcourse checkpoint \(its contents do not match the "
                             r"checksum saved with them\): train the model again, or copy the file again")
    assert files_under(home) == before


def test_a_zeroed_block_inside_last_pt_is_refused_by_resume(home, capsys, trained):
    run = copy_run(trained, home)
    zero_4k(run / "last.pt")
    before = files_under(home)
    code, _, err = cli(capsys, train_argv(trained[0], run, "--resume", "--set", "epochs=2"))
    assert code == 1
    assert_one_sentence(err, r"last\.pt is damaged \(its contents do not match the checksum saved with them\): "
                             r"resume from an intact copy")
    assert files_under(home) == before


@pytest.mark.parametrize("at", [0.0, 0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("which", ["embedding.weight", "rnns.0.weight_hh_l0", "head.decoder.bias"])
def test_a_single_flipped_bit_in_a_weight_is_refused(tmp_path, which, at):
    path = tmp_path / "model.pt"
    save_checkpoint(path, tiny_model())
    zero_inside(path, torch.load(path, weights_only=True)["state_dict"][which], n=0, at=at)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, map_location="cpu")
    assert_one_sentence(str(err.value), r"model\.pt is damaged .*\(its contents do not match the checksum")


def test_a_checkpoint_without_a_checksum_is_refused(tmp_path):
    path = tmp_path / "model.pt"
    save_checkpoint(path, tiny_model())
    payload = torch.load(path, weights_only=True)
    del payload[checksum.KEY]
    torch.save(dict(payload, format=1), path)  # as written before checkpoints carried one
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, map_location="cpu")
    assert_one_sentence(str(err.value), r"saved by an earlier lmcourse without a checksum, so it cannot be told "
                                        r"from a damaged file: train the model again")


@pytest.mark.parametrize("damage", ["300 ids zeroed", "4 KiB zeroed", "one flipped bit", "ids changed, resaved",
                                    "another corpus's cache"])
def test_a_damaged_token_cache_is_rebuilt(tmp_path, monkeypatch, damage):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "CACHE_MIN_BYTES", 0)
    folder = small_corpus(tmp_path / "mine")
    right = data.load_corpus(folder, cache=False)
    data.load_corpus(folder)  # writes the cache
    (cached,) = (tmp_path / "cache" / "tokens").glob("mine-word-*.pt")
    if damage == "300 ids zeroed":
        zero_inside(cached, right.valid, n=300 * 8)  # 300 ids of the valid stream read as 0
    elif damage == "4 KiB zeroed":
        zero_inside(cached, right.train, n=4096, at=0.5)
    elif damage == "one flipped bit":
        zero_inside(cached, right.test, n=0, at=0.5)
    elif damage == "ids changed, resaved":  # a valid file, but not what it claims to be
        saved = torch.load(cached, weights_only=True)
        saved["valid"][:300] = 0
        torch.save(saved, cached)
    else:
        other = small_corpus(tmp_path / "other" / "mine")
        (other / "train.txt").write_text("w1 w2 w3\n" * 500)
        saved = torch.load(cached, weights_only=True)
        data.load_corpus(other)  # its cache replaces this one (the same corpus name)...
        (theirs,) = (tmp_path / "cache" / "tokens").glob("mine-word-*.pt")
        theirs.rename(cached)  # ...and is put under this one's key
        assert torch.load(cached, weights_only=True)["source"] != saved["source"]
    again = data.load_corpus(folder)
    assert again.vocab == right.vocab
    assert all(torch.equal(getattr(again, s), getattr(right, s)) for s in ("train", "valid", "test"))
    assert torch.equal(torch.load(cached, weights_only=True)["valid"], right.valid)  # rewritten whole


def live_tensors() -> int:
    import gc
    gc.collect()
    return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor))


@pytest.mark.parametrize("wrapper", ["dynamic evaluation (rms)", "dynamic evaluation (sgd)",
                                     "cache over dynamic evaluation", "the model alone"])
def test_scoring_a_stream_keeps_no_tensor_per_segment(monkeypatch, wrapper):
    from lmcourse.adapt.cache import NeuralCache
    from lmcourse.adapt.dyneval import gradient_stats
    model = tiny_model()
    stream = torch.randint(0, len(WORDS), (600,), generator=torch.Generator().manual_seed(0))
    scorer = {"dynamic evaluation (sgd)": lambda: DynamicEval(model, "sgd", lr=0.1),
              "dynamic evaluation (rms)": lambda: DynamicEval(model, "rms", stats=gradient_stats(
                  model, stream, batch_size=4, progress=False)),
              "cache over dynamic evaluation": lambda: NeuralCache(DynamicEval(model, "sgd", lr=0.1), window=20),
              "the model alone": lambda: model}[wrapper]()
    counts, calls = {}, [0]
    forward = RNNLM.forward

    def counting(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] in (20, 110):
            counts[calls[0]] = live_tensors()
        return forward(self, *args, **kwargs)
    monkeypatch.setattr(RNNLM, "forward", counting)
    chunk = 5 if wrapper == "the model alone" else None  # the bare model reads chunks: make them short too
    logp = scorer.score(stream) if chunk is None else scorer.score(stream, bptt=chunk)
    assert logp.shape == (600,) and calls[0] == 120
    assert counts[110] - counts[20] < 20, counts  # 90 segments later: no tensor kept per segment


# ------------------------------------------------------------------ numbers out of range

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


@pytest.mark.parametrize("kwargs, pattern", [
    ({"seed": -1}, r"TrainConfig\.seed must be a whole number from 0 to 2147483647, got -1"),
    ({"seed": "abc"}, r"TrainConfig\.seed must be a whole number .*got 'abc'"),
    ({"seed": 2**40}, r"TrainConfig\.seed must be a whole number"),
    ({"lr_decay": math.inf}, r"TrainConfig\.lr_decay must be a finite number >= 1"),
    ({"lr": math.nan}, r"TrainConfig\.lr must be a finite number >= 0, got nan"),
    ({"variable_bptt": "yes"}, r"TrainConfig\.variable_bptt must be True or False, got 'yes'"),
    ({"out_dir": ""}, r"TrainConfig\.out_dir is empty: give a path, or None"),
])
def test_train_config_checks_every_number_at_construction(kwargs, pattern):
    with pytest.raises(ValueError) as err:
        TrainConfig(epochs=1, **kwargs)
    assert_one_sentence(str(err.value), pattern)


@pytest.mark.parametrize("sizes", [dict(hidden_size=10**8), dict(vocab_size=10**7, emb_size=10**5)])
def test_a_model_too_big_for_the_machine_is_one_sentence_before_any_allocation(sizes):
    config = LMConfig(**{"vocab_size": 10, "num_layers": 1, **sizes})
    with pytest.raises(ValueError) as err:
        RNNLM(config)
    assert_one_sentence(str(err.value), r"The model has about [0-9,]+ parameters, [0-9,.]+ GB of weights before any "
                                        r"gradient, more than the [0-9,.]+ GB of memory of this machine: lower "
                                        r"hidden_size, emb_size or num_layers")
    with torch.device("meta"):  # a skeleton, no memory: counted exactly as the check counts
        assert RNNLM(config).num_parameters() == count_parameters(config)


def test_the_parameter_count_before_building_matches_the_built_model():
    for config in (LMConfig(50, emb_size=8, hidden_size=12, num_layers=3), LMConfig(50, emb_size=8, tie=True,
                                                                                    hidden_size=12, num_layers=2)):
        assert count_parameters(config) == RNNLM(config).num_parameters()


@pytest.mark.parametrize("kwargs, pattern", [
    ({"init_range": math.inf}, r"LMConfig\.init_range must be a finite number > 0, got inf"),
    ({"init_range": math.nan}, r"LMConfig\.init_range must be a finite number > 0, got nan"),
    ({"last_size": -4}, r"LMConfig\.last_size must be a positive integer or None, got -4"),
    ({"head": "foo"}, r"LMConfig\.head='foo' is unknown: use one of mos, softmax"),
    ({"dropout": True}, r"LMConfig\.dropout=True is not a dropout probability"),
])
def test_model_config_checks_every_number_at_construction(kwargs, pattern):
    with pytest.raises(ValueError) as err:
        LMConfig(vocab_size=10, **kwargs)
    assert_one_sentence(str(err.value), pattern)


def test_a_huge_finite_loss_is_an_infinite_perplexity_not_an_overflow():
    class Terrible:
        def score(self, tokens):
            return torch.full((len(tokens),), -1e6, dtype=torch.float64)
    assert perplexity(Terrible(), [0, 1]) == math.inf


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


# ------------------------------------------------------------------ evaluate and the run it reads

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


# ------------------------------------------------------------------ a process of a torchrun job stops

@pytest.mark.skipif(not torch.distributed.is_available() or not hasattr(signal, "SIGSTOP"),
                    reason="needs torch.distributed and POSIX signals")
def test_a_rank_that_stops_answering_is_named_after_the_timeout(tmp_path):
    from test_distributed import SILENCE_S, stop_a_rank

    message = stop_a_rank(tmp_path)  # two gloo processes; rank 1 pauses itself (SIGSTOP) after two batches
    assert message.startswith("StoppedRankError: "), message
    assert_one_sentence(message.split(": ", 1)[1], rf"^Process rank 1 of 2 stopped answering, and rank 0 gave up after "
                                                   rf"waiting {SILENCE_S} s: find out what stopped it .*--resume; "
                                                   r"LMCOURSE_DIST_TIMEOUT sets how long the others wait")


# ------------------------------------------------------------------ writes that fail

def test_a_disk_that_fills_during_the_write_is_one_sentence_and_keeps_the_old_file(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "model.pt", tiny_model())
    before = files_under(tmp_path)
    free = iter([10**9, 2000])  # room before the write, none after it failed

    def full(obj, f):
        f.write(b"PK\x03\x04" + bytes(100))
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4224 vs 4122")
    monkeypatch.setattr(checkpoint.torch, "save", full)
    monkeypatch.setattr(checkpoint, "free_bytes", lambda folder: next(free, 2000))
    with pytest.raises(NoSpaceError) as err:
        save_checkpoint(tmp_path / "model.pt", tiny_model())
    assert_one_sentence(str(err.value), r"No space left on the disk of .* to write model\.pt \(needed about [0-9.]+ "
                                        r"kB, 2\.0 kB free\): free some space, or write to another folder")
    assert files_under(tmp_path) == before  # the old file whole, the partial temporary one gone


def test_a_disk_without_room_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "free_bytes", lambda folder: 1000)
    with pytest.raises(NoSpaceError) as err:
        save_checkpoint(tmp_path / "model.pt", tiny_model())
    assert_one_sentence(str(err.value), r"No space left on the disk of .* to write model\.pt \(needed about [0-9.]+ "
                                        r"kB, 1\.0 kB free\)")
    assert list(tmp_path.iterdir()) == []


def test_train_on_a_full_disk_says_so(home, capsys, trained, monkeypatch):
    monkeypatch.setattr(checkpoint, "free_bytes", lambda folder: 0)
    code, _, err = cli(capsys, train_argv(trained[0], home / "run"))
    assert code == 1
    assert_one_sentence(err, r"No space left on the disk of .*run to write preset\.json \(needed about [0-9.]+ kB, "
                             r"0\.0 kB free\)")
    assert not (home / "run").exists() or not list((home / "run").iterdir())


def test_no_space_from_the_system_is_the_same_sentence(tmp_path, monkeypatch):
    def write(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(NoSpaceError) as err:
        checkpoint.atomic_write(tmp_path / "history.json", lambda f: write(tmp_path, b""), needed=3_000_000)
    assert_one_sentence(str(err.value), r"No space left on the disk of .* to write history\.json \(needed about "
                                        r"3\.0 MB")
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_folder_names_the_file_not_its_temporary(tmp_path, monkeypatch):
    def refuse(prefix, suffix, dir):
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(dir) / f"{prefix}x1y2{suffix}"))
    monkeypatch.setattr(checkpoint.tempfile, "mkstemp", refuse)
    with pytest.raises(WriteError) as err:
        save_checkpoint(tmp_path / "model.pt", tiny_model())
    assert_one_sentence(str(err.value), r"model\.pt cannot be written \(Permission denied\): choose a folder you may "
                                        r"write to")
    assert ".tmp" not in str(err.value)
    with pytest.raises(WriteError) as err:
        RunDir(tmp_path).write_history({"rows": []})
    assert_one_sentence(str(err.value), r"history\.json cannot be written \(Permission denied\)")
    assert ".tmp" not in str(err.value)


def test_temporary_files_of_a_killed_write_are_removed_on_the_next_start(home, capsys, trained):
    run = copy_run(trained, home)
    for name in (".last.pt.k1l2d3.tmp", ".history.json.a9b8.tmp", ".preset.json.x.tmp", ".best.pt.0a9sdk.tmp"):
        (run / name).write_bytes(b"half a file")
    (run / "notes.tmp").write_text("mine\n")  # not a run file's temporary: kept
    code, _, err = cli(capsys, train_argv(trained[0], run, "--resume", "--set", "epochs=2"))
    assert code == 0, err
    assert not list(run.glob(".*.tmp")) and (run / "notes.tmp").exists()


# ------------------------------------------------------------------------------------- CUDA

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_the_same_checks_hold(tmp_path):
    path = tmp_path / "model.pt"
    save_checkpoint(path, tiny_model())
    model, _ = load_checkpoint(path, map_location="cuda")
    assert next(model.parameters()).is_cuda
    with pytest.raises(ValueError) as err:
        model.score(torch.tensor([0, 6], device="cuda"))
    assert_one_sentence(str(err.value), r"Token id 6 is outside the vocabulary of 6")
    with pytest.raises(TypeError, match="got strings"):
        model.score(["the", "cat"])
    _damaged(path, "truncated")
    with pytest.raises(CheckpointError, match="damaged"):
        load_checkpoint(path, map_location="cuda")
    logp = torch.log_softmax(torch.tensor([[0.0, 2.0, 1.0]], device="cuda"), dim=-1)
    probs = sampling_distribution(logp, temperature=1e-310)
    assert probs.is_cuda and probs.argmax().item() == 1 and probs.sum().item() == 1.0
