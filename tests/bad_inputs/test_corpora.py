"""lmcourse.corpora: a corpus folder that cannot give words is refused in one sentence naming the file."""
import errno
import math
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from lmcourse.corpora import data, download, embedded
from lmcourse.corpora.grammar import Params
from lmcourse.errors import CorpusError, NoSpaceError, WriteError
from lmcourse.lm import perplexity
from lmcourse.ngram.model import NGramLM

from .helpers import assert_one_sentence, cli, files_under, write_corpus

BLANK = ["\n", "\n\n\n", "   \n\t\n", " \r\n \r\n", "\u00a0\n"]  # U+00A0 is whitespace to str.split


@pytest.mark.parametrize("split", ["train", "valid", "test"])
@pytest.mark.parametrize("text", BLANK, ids=[repr(t) for t in BLANK])
def test_a_split_with_no_words_is_refused(tmp_path, split, text):
    folder = write_corpus(tmp_path / "corpus")
    (folder / f"{split}.txt").write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError) as err:
        data.load_corpus(folder, cache=False)
    assert_one_sentence(str(err.value), rf"{split}\.txt has no words, only blank lines: every split needs some text")


def test_the_character_level_still_reads_whitespace(tmp_path):
    folder = write_corpus(tmp_path / "corpus", valid="  \n")
    corpus = data.load_corpus(folder, level="char", cache=False)
    assert corpus.valid.numel() == 3


def _vocab_case(folder: Path, kind: str) -> None:
    vocab = folder / "vocab.txt"
    if kind == "empty":
        vocab.write_text("")
    elif kind == "blank lines":
        vocab.write_text("\n \n\t\n")
    elif kind == "folder":
        vocab.mkdir()
    elif kind == "loop":
        os.symlink(vocab, vocab)
    elif kind == "dangling":
        os.symlink(folder / "gone.txt", vocab)


VOCAB_CASES = [
    ("empty", r"vocab\.txt is empty: list one token a line, or delete it"),
    ("blank lines", r"vocab\.txt holds only blank lines: list one token a line"),
    ("folder", r"vocab\.txt is a folder, not a text file"),
    ("loop", r"vocab\.txt is a loop of symbolic links"),
    ("dangling", r"vocab\.txt points to a file that does not exist"),
]


@pytest.mark.parametrize("kind, pattern", VOCAB_CASES, ids=[c[0] for c in VOCAB_CASES])
def test_a_vocab_txt_that_cannot_be_a_list_is_named(tmp_path, kind, pattern):
    folder = write_corpus(tmp_path / "corpus")
    _vocab_case(folder, kind)
    with pytest.raises(CorpusError) as err:
        data.load_corpus(folder, cache=False)
    assert_one_sentence(str(err.value), pattern)
    assert "every split needs some text" not in str(err.value)


def _link_case(root: Path, kind: str) -> Path:
    folder = write_corpus(root / "corpus", train=None)
    train = folder / "train.txt"
    if kind == "self loop":
        os.symlink(train, train)
    elif kind == "two-link loop":
        os.symlink(folder / "other.txt", train)
        os.symlink(train, folder / "other.txt")
    elif kind == "dangling":
        os.symlink(folder / "moved.txt", train)
    elif kind == "folder loop":
        os.symlink(root / "loop", root / "loop")
        return root / "loop"
    return folder


LINK_CASES = [
    ("self loop", r"train\.txt is a loop of symbolic links"),
    ("two-link loop", r"train\.txt is a loop of symbolic links"),
    ("dangling", r"train\.txt points to a file that does not exist"),
    ("folder loop", r"loop is a loop of symbolic links"),
]


@pytest.mark.parametrize("kind, pattern", LINK_CASES, ids=[c[0] for c in LINK_CASES])
def test_a_link_that_cannot_be_followed_is_named_not_called_missing(tmp_path, kind, pattern):
    where = _link_case(tmp_path, kind)
    with pytest.raises(CorpusError) as err:
        data.load_corpus(where, cache=False)
    assert_one_sentence(str(err.value), pattern)
    assert "has no train.txt" not in str(err.value) and "does not exist: give a folder" not in str(err.value)


@pytest.mark.parametrize("case", ["blank train", "empty vocab", "self loop"])
def test_the_command_line_says_the_same_sentence(home, capsys, case):
    folder = write_corpus(home / "corpus")
    if case == "blank train":
        (folder / "train.txt").write_text("\n \n")
    elif case == "empty vocab":
        _vocab_case(folder, "empty")
    else:
        (folder / "train.txt").unlink()
        os.symlink(folder / "train.txt", folder / "train.txt")
    code, out, err = cli(capsys, ["data", "--data", str(folder)])
    assert code == 1 and out == ""
    assert_one_sentence(err.removeprefix("error: "), r"(no words|is empty|loop of symbolic links)")


SMALL = replace(Params(), train_tokens=2_000, valid_tokens=300, test_tokens=300)


@pytest.mark.parametrize("code, kind, pattern", [
    (errno.ENOSPC, NoSpaceError, r"No space left on the disk of .* to write the embedded corpus \(needed about \d+ MB\)"),
    (errno.EDQUOT, NoSpaceError, r"No space left on the disk of"),
    (errno.EACCES, WriteError, r"The embedded corpus cannot be written to .*: set LMCOURSE_CACHE"),
])
def test_a_disk_that_fills_while_the_embedded_corpus_is_written_says_where_and_how_much(tmp_path, monkeypatch,
                                                                                     code, kind, pattern):
    folder = tmp_path / "embedded"
    embedded.write_corpus(folder, SMALL)
    before = files_under(tmp_path)
    written = []

    real = embedded.atomic_write

    def fill(path, data, **options):
        written.append(path)
        if len(written) == 3:  # the disk fills in the middle of the corpus
            def full(f):
                raise OSError(code, os.strerror(code), str(path))
            return real(path, full, **options)
        return real(path, data, **options)

    monkeypatch.setattr(embedded, "atomic_write", fill)
    with pytest.raises(kind) as err:
        embedded.write_corpus(folder, SMALL)
    assert_one_sentence(str(err.value), pattern)
    assert str(tmp_path) in str(err.value)
    assert files_under(tmp_path) == before  # the corpus already there is kept whole, no temporary left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["embedded"]


# ----------------------------------------------------------------------------------------- corpora


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


# ---------------------------------------------------------------------------------------- batching


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


# --------------------------------------------------------------------------------------- downloads


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


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("name", ["valid.txt", "vocab.txt"])
def test_a_fifo_is_named_as_what_it_is(tmp_path, name):
    """Issue 42, unclear: a FIFO was reported as "has no valid.txt" (and reading one would wait forever)."""
    folder = write_corpus(tmp_path / "corpus")
    (folder / name).unlink(missing_ok=True)
    os.mkfifo(folder / name)
    with pytest.raises(CorpusError) as err:
        data.load_corpus(folder, cache=False)
    assert_one_sentence(str(err.value), rf"{re.escape(name)} is a named pipe \(FIFO\), not a text file: ")
