"""Bad and edge inputs, the way a careless user or a hostile file would give them.

Each case asserts three things: the exit status (command line) or the exception type (library);
one sentence naming what was wrong and what to do, never a traceback; and that nothing was
written or lost (the files under the test's folders are exactly what they were).
"""
import hashlib
import math
import os
import pickle
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmcourse import config, errors
from lmcourse.__main__ import main
from lmcourse.corpora import data, download
from lmcourse.corpora.download import Remote
from lmcourse.errors import CheckpointError, ConfigError, CorpusError, LMCourseError, MissingFileError
from lmcourse.lm import perplexity
from lmcourse.networks.generate import beam_search, sample, sampling_distribution
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.ngram.model import NGramLM
from lmcourse.training import checkpoint
from lmcourse.training.checkpoint import check_writable, load_checkpoint, save_checkpoint
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
    assert code == 1
    assert_one_sentence(err, r"Unknown corpus 'no-such-corpus'")
    monkeypatch.setenv("LMCOURSE_DATASET", str(write_corpus(home / "mine")))
    code, out, _ = cli(capsys, [command, "--order", "2"] if command == "ngram" else [command])
    assert code == 0 and '"data": "mine"' in out.splitlines()[-1]


@pytest.mark.parametrize("variable, value, pattern", [
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


def test_a_bad_scale_does_not_stop_the_import(tmp_path):
    run = _python(["-c", "import lmcourse, lmcourse.corpora.data, lmcourse.ngram.model; print('imported')"],
                  {"LMCOURSE_SCALE": "banana"}, tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "imported", run.stderr


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
    model = tiny_model()
    save_checkpoint(path, model)
    payload = torch.load(path, weights_only=True)
    for key, value in changes.items():
        if value is ...:
            del payload[key]
        else:
            payload[key] = value(payload) if callable(value) else value
    torch.save(payload, path)


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
    assert list((tmp_path / "a").iterdir()) == [] and checkpoint.FORMAT == 1


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
