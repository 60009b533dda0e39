"""Corpus loading and batching: conventions, vocabularies, errors, and the published corpus sizes."""
import os
import urllib.request
from pathlib import Path

import pytest
import torch

from lmcourse.corpora import data, embedded
from lmcourse.corpora.data import (
    batchify,
    bptt_batches,
    load_corpus,
    split_one_file,
    variable_bptt_batches,
    words_of,
)
from lmcourse.vocab import EOS, UNK


def line_words(path: Path) -> list[str]:
    """The reference convention, read line by line as the AWD-LSTM code does."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out += line.split() + [EOS]
    return out


def write_corpus(folder: Path, train: str, valid: str, test: str, vocab=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in zip(("train", "valid", "test"), (train, valid, test)):
        (folder / f"{split}.txt").write_bytes(text.encode("utf-8"))
    if vocab is not None:
        (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return folder


TRAIN = " the cat sat \n\n on the  mat\r\n a\tcat"  # blank line, CRLF, tab, no final newline
VALID = "the dog\n"
TEST = "  \na cat ran\n"


# --- word level --------------------------------------------------------------------------------


def test_word_stream_matches_line_by_line_reading(tmp_path):
    folder = write_corpus(tmp_path / "tiny", TRAIN, VALID, TEST)
    corpus = load_corpus(folder)
    known = set(line_words(folder / "train.txt"))
    for split in ("train", "valid", "test"):
        expected = [w if w in known else UNK for w in line_words(folder / f"{split}.txt")]
        assert corpus.vocab.decode(getattr(corpus, split)) == expected
    assert corpus.name == "tiny" and corpus.level == "word"


def test_words_of_gives_eos_for_blank_and_unterminated_lines():
    assert words_of("a b\n\nc") == ["a", "b", EOS, EOS, "c", EOS]
    assert words_of(" \n") == [EOS]


def test_vocabulary_is_train_in_order_of_first_appearance_then_unk(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path / "tiny", TRAIN, VALID, TEST))
    first_seen = []
    for w in line_words(tmp_path / "tiny/train.txt"):
        if w not in first_seen:
            first_seen.append(w)
    assert corpus.vocab.itos == first_seen + [UNK]
    assert corpus.train.dtype == torch.long and corpus.train.dim() == 1
    # valid "the dog": dog is unseen in train; test "a cat ran": ran is unseen
    assert corpus.unk_mapped == {"train": 0, "valid": 1, "test": 1}
    assert "2 tokens read as <unk> (train 0, valid 1, test 1)" in repr(corpus)


def test_editing_test_changes_neither_vocabulary_nor_valid(tmp_path):
    before = load_corpus(write_corpus(tmp_path / "a", TRAIN, VALID, TEST))
    after = load_corpus(write_corpus(tmp_path / "b", TRAIN, VALID, TEST + "zebra quagga okapi\n"))
    assert after.vocab == before.vocab and torch.equal(after.valid, before.valid)
    assert after.unk_mapped["test"] == before.unk_mapped["test"] + 3


def test_unk_in_train_keeps_its_place_and_min_count_maps_rare_words(tmp_path):
    folder = write_corpus(tmp_path / "m", "a b a <unk>\nb a c\n", "a d\n", "c\n")
    assert load_corpus(folder).vocab.itos == ["a", "b", UNK, EOS, "c"]
    rare = load_corpus(folder, min_count=2)  # c is seen once
    assert rare.vocab.itos == ["a", "b", UNK, EOS]
    assert rare.vocab.decode(rare.train) == ["a", "b", "a", UNK, EOS, "b", "a", UNK, EOS]
    assert rare.unk_mapped == {"train": 1, "valid": 1, "test": 1}  # the <unk> of the file is not counted
    assert load_corpus(folder, min_count=3).vocab.itos == ["a", UNK, EOS]  # <eos> is always kept


def test_vocab_txt_is_used_in_its_order(tmp_path):
    itos = ["zebra", EOS, "ran", "cat", "a", "dog", "the", "sat", "on", "mat"]
    corpus = load_corpus(write_corpus(tmp_path / "v", TRAIN, VALID, TEST, vocab=itos))
    assert corpus.vocab.itos == itos
    assert corpus.vocab.decode(corpus.valid) == ["the", "dog", EOS]


def test_vocab_txt_missing_a_word_is_a_clear_error(tmp_path):
    folder = write_corpus(tmp_path / "v", TRAIN, VALID, TEST, vocab=["the", "cat", EOS])
    with pytest.raises(ValueError, match="'sat' of train.txt is not in .*vocab.txt"):
        load_corpus(folder)


# --- character level -----------------------------------------------------------------------


def test_char_level_keeps_newlines_and_sorts_the_characters(tmp_path):
    folder = write_corpus(tmp_path / "c", "ba\nc\n", "ca\n", "b\n")
    corpus = load_corpus(folder, level="char")
    assert corpus.vocab.itos == sorted(set("ba\nc\n"))
    assert corpus.vocab.to_text(corpus.train) == "ba\nc\n"
    assert corpus.vocab.to_text(corpus.valid) == "ca\n"
    assert corpus.vocab.itos[corpus.vocab.eos] == "\n"
    assert corpus.unk_mapped == {"train": 0, "valid": 0, "test": 0} and "read as" not in repr(corpus)


def test_char_level_reads_characters_unseen_in_train_as_the_replacement_character(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path / "c", "ba\nc\n", "éa\n", "bü\n"), level="char")
    assert corpus.vocab.itos == sorted(set("ba\nc\n") | {"\ufffd"})
    assert corpus.vocab.to_text(corpus.valid) == "\ufffda\n" and corpus.vocab.to_text(corpus.test) == "b\ufffd\n"
    assert corpus.unk_mapped == {"train": 0, "valid": 1, "test": 1}


def test_a_byte_order_mark_is_not_part_of_the_first_token(tmp_path):
    folder = write_corpus(tmp_path / "bom", "the cat\n", "the\n", "cat\n")
    (folder / "train.txt").write_bytes(b"\xef\xbb\xbfthe cat\n")
    corpus = load_corpus(folder)
    assert corpus.vocab.itos == ["the", "cat", EOS, UNK] and corpus.unk_mapped["valid"] == 0
    assert load_corpus(folder, level="char").vocab.to_text(load_corpus(folder, level="char").train) == "the cat\n"


def test_char_level_ignores_a_word_vocab_txt(tmp_path):
    folder = write_corpus(tmp_path / "c", "ab\n", "b\n", "a\n", vocab=["ab", "b", "a", EOS])
    assert load_corpus(folder, level="char").vocab.itos == ["\n", "a", "b"]


# --- bad input -------------------------------------------------------------------------------


def test_unknown_name_lists_the_names_and_mentions_folders():
    with pytest.raises(ValueError) as err:
        load_corpus("penn-treebank")
    msg = str(err.value)
    assert "penn-treebank" in msg and all(n in msg for n in data.NAMES) and "folder" in msg


def test_missing_folder_split_level_and_empty_file_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_corpus(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="is a file, not a folder"):
        load_corpus(write_corpus(tmp_path / "f", "a\n", "b\n", "c\n") / "train.txt")
    folder = write_corpus(tmp_path / "t", "a\n", "b\n", "c\n")
    (folder / "test.txt").unlink()
    with pytest.raises(ValueError, match="no test.txt"):
        load_corpus(folder)
    (folder / "test.txt").write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_corpus(folder)
    with pytest.raises(ValueError, match="'word' or 'char'"):
        load_corpus(folder, level="byte")
    with pytest.raises(TypeError, match="string or a folder path"):
        load_corpus(42)


# --- the token cache -------------------------------------------------------------------------


def test_token_cache_gives_the_same_corpus_and_follows_file_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "CACHE_MIN_BYTES", 0)
    folder = write_corpus(tmp_path / "tiny", TRAIN, VALID, TEST)
    fresh = load_corpus(folder, cache=False)
    assert not (tmp_path / "cache").exists()
    first = load_corpus(folder)  # encodes and writes the cache
    assert len(list((tmp_path / "cache/tokens").glob("tiny-word-*.pt"))) == 1
    second = load_corpus(folder)  # reads it back
    for c in (first, second):
        assert c.vocab == fresh.vocab
        assert all(torch.equal(getattr(c, s), getattr(fresh, s)) for s in ("train", "valid", "test"))
    (folder / "train.txt").write_text(TRAIN + " zebra\n")  # changes size and mtime: the cache is not reused
    changed = load_corpus(folder)
    assert changed.vocab.decode(changed.train)[-2:] == ["zebra", EOS]
    assert len(list((tmp_path / "cache/tokens").glob("tiny-word-*.pt"))) == 1  # the stale one is gone


def test_token_cache_sees_an_edit_that_keeps_size_and_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "CACHE_MIN_BYTES", 0)
    folder = write_corpus(tmp_path / "tiny", "the cat\n", "the\n", "cat\n")
    path = folder / "train.txt"
    assert load_corpus(folder).vocab.itos == ["the", "cat", EOS, UNK]
    stat = path.stat()
    path.write_text("the cow\n")  # same size; then the old modification time restored, as `touch -r` does
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_corpus(folder).vocab.itos == ["the", "cow", EOS, UNK]


# --- the embedded corpus ---------------------------------------------------------------------


def test_embedded_corpus_uses_its_generator_vocabulary():
    folder = Path(embedded.ensure())
    corpus = load_corpus(cache=False)
    itos = [t for t in (folder / "vocab.txt").read_text(encoding="utf-8").split("\n") if t]
    assert corpus.name == "embedded" and corpus.vocab.itos == itos
    assert corpus.vocab.decode(corpus.valid) == line_words(folder / "valid.txt")
    again = load_corpus("embedded")
    assert again.vocab == corpus.vocab and torch.equal(again.train, corpus.train)


# --- Tiny Shakespeare split ------------------------------------------------------------------


def test_shakespeare_split_is_90_5_5_at_line_starts():
    lines = [f"line {i} " + "x" * (i % 13) + "\n" for i in range(997)]
    text = "".join(lines)
    parts = split_one_file(text)
    assert "".join(parts) == text
    n, longest = len(text), max(len(s) for s in lines)
    starts = {0} | {i + 1 for i, ch in enumerate(text) if ch == "\n"}
    a, b = len(parts[0]), len(parts[0]) + len(parts[1])
    assert a in starts and b in starts
    assert 0 <= a - 0.90 * n < longest + 1 and 0 <= b - 0.95 * n < longest + 1


# --- batching --------------------------------------------------------------------------------


def test_batchify_cuts_contiguous_columns_and_trims():
    tokens = torch.arange(23)
    S = batchify(tokens, 4)
    assert S.shape == (5, 4)
    for b in range(4):
        assert torch.equal(S[:, b], tokens[5 * b:5 * (b + 1)])
    assert torch.equal(batchify(tokens, 1)[:, 0], tokens)


def test_batchify_errors():
    with pytest.raises(ValueError, match="fewer than batch_size"):
        batchify(torch.arange(3), 4)
    with pytest.raises(ValueError, match="at least 1"):
        batchify(torch.arange(3), 0)
    with pytest.raises(ValueError, match="1-D"):
        batchify(torch.zeros(3, 2, dtype=torch.long), 2)


def test_bptt_batches_cover_the_stream_once_with_y_shifted():
    S = batchify(torch.arange(1000), 7)  # (142, 7)
    batches = list(bptt_batches(S, 30))
    assert [x.size(0) for x, _ in batches] == [30, 30, 30, 30, 21]
    assert torch.equal(torch.cat([x for x, _ in batches]), S[:-1])
    assert torch.equal(torch.cat([y for _, y in batches]), S[1:])
    for x, y in batches:
        assert torch.equal(y[:-1], x[1:]) and x.shape == y.shape


def _lengths(S, seed, **kw):
    g = torch.Generator().manual_seed(seed)
    return [(x.size(0), n) for x, _, n in variable_bptt_batches(S, generator=g, **kw)]


def test_variable_bptt_is_reproducible_and_covers_the_stream():
    S = batchify(torch.arange(20000), 4)
    assert _lengths(S, 3, bptt=70) == _lengths(S, 3, bptt=70)
    assert _lengths(S, 3, bptt=70) != _lengths(S, 4, bptt=70)
    g = torch.Generator().manual_seed(0)
    batches = list(variable_bptt_batches(S, 70, g))
    assert torch.equal(torch.cat([y for _, y, _ in batches]), S[1:])
    assert torch.equal(torch.cat([x for x, _, _ in batches]), S[:-1])
    assert all(x.size(0) == n for x, _, n in batches[:-1])


def test_variable_bptt_lengths_respect_min_max_and_mean():
    S = batchify(torch.arange(400000), 2)
    pairs = _lengths(S, 1, bptt=70)
    drawn = torch.tensor([n for _, n in pairs[:-1]], dtype=torch.float64)
    assert drawn.min() >= 5
    # E[int(N(mu, 5^2))] = mu - 1/2 for mu >> 5 (truncation towards zero); mu = 70 w.p. 0.95, else 35.
    expected = 0.95 * 70 + 0.05 * 35 - 0.5
    assert abs(drawn.mean().item() - expected) < 4 * drawn.std().item() / len(drawn) ** 0.5 + 0.05
    short = (drawn < 52).double().mean().item()  # the bptt/2 windows
    assert abs(short - 0.05) < 4 * (0.05 * 0.95 / len(drawn)) ** 0.5
    capped = _lengths(S, 1, bptt=70, max_len=60, min_len=40, sigma=20.0)
    assert all(40 <= n <= 60 and x <= 60 for x, n in capped)
    assert {n for _, n in _lengths(S[:200], 0, bptt=9, p=1.0, sigma=0.0)} == {9}


def test_variable_bptt_errors():
    S = batchify(torch.arange(100), 2)
    with pytest.raises(TypeError, match="torch.Generator"):
        next(variable_bptt_batches(S, 10, generator=0))
    with pytest.raises(ValueError, match="below min_len"):
        next(variable_bptt_batches(S, 10, torch.Generator(), min_len=5, max_len=4))
    with pytest.raises(ValueError, match="batchify"):
        next(variable_bptt_batches(torch.arange(100), 10, torch.Generator()))


# --- the real corpora ------------------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the network was used although the files are present")
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.mark.real_data
def test_ptb_sizes_match_the_published_counts(real_data_dir, no_network):
    corpus = load_corpus("ptb", data_dir=real_data_dir, cache=False)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (929_589, 73_760, 82_430)
    assert len(corpus.vocab) == 10_000
    assert corpus.vocab.decode(corpus.test[:200]) == line_words(real_data_dir / "ptb/test.txt")[:200]


@pytest.mark.real_data
def test_wikitext2_sizes_match_the_published_counts(real_data_dir, no_network):
    corpus = load_corpus("wikitext-2", data_dir=real_data_dir, cache=False)
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (2_088_628, 217_646, 245_569)
    assert len(corpus.vocab) == 33_278


@pytest.mark.real_data
def test_tinyshakespeare_has_65_characters(real_data_dir, no_network):
    corpus = load_corpus("tinyshakespeare", level="char", data_dir=real_data_dir, cache=False)
    assert len(corpus.vocab) == 65
    assert sum(len(s) for s in (corpus.train, corpus.valid, corpus.test)) == 1_115_394
    assert 0.89 < len(corpus.train) / 1_115_394 < 0.91


@pytest.mark.real_data
def test_ptb_at_character_level(real_data_dir, no_network):
    corpus = load_corpus("ptb", level="char", data_dir=real_data_dir, cache=False)
    for split in ("train", "valid", "test"):  # PTB is ASCII: one character per byte
        assert len(getattr(corpus, split)) == os.path.getsize(real_data_dir / "ptb" / f"{split}.txt")
    assert corpus.vocab.to_text(corpus.valid[:500]) == (real_data_dir / "ptb/valid.txt").read_text()[:500]
