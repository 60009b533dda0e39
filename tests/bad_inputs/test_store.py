"""lmcourse.store: a manifest names only files inside its folder, a damaged or missing one is named, and a
stored measurement is sealed: a flipped bit is computed afresh, never read as another number."""
import json
import os
from pathlib import Path

import pytest
import torch

from lmcourse.errors import CheckpointError
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.store import reference_runs as reference
from lmcourse.store import stored_numbers
from lmcourse.vocab import Vocab

from .helpers import assert_one_sentence, files_under

VOCAB = Vocab(["<eos>", "a", "b"])
AT = dict(scale="cpu", dataset="embedded")  # the key parts the store is given (it reads no global setting)


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """(the reference folder, a file outside it that must survive) with the environment pointing there."""
    where, outside = tmp_path / "reference", tmp_path / "elsewhere" / "precious.txt"
    where.mkdir()
    outside.parent.mkdir()
    outside.write_text("keep me\n")
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(where))
    monkeypatch.setenv(reference.STORE_ENV, "1")
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    return where, outside


def _entry(file: str, **more) -> dict:
    return {"file": file, "lesson": "06", "name": "06-x", "key": "k", "sha256": "0" * 64, "saved_at": 0.0, **more}


def _hostile_name(where: Path, outside: Path, kind: str) -> str:
    if kind == "parent":
        return "../elsewhere/precious.txt"
    if kind == "absolute":
        return str(outside)
    if kind == "subfolder":
        (where / "sub").mkdir()
        return "sub/06-x.pt"
    if kind == "link out":
        os.symlink(outside, where / "06-x.pt")
        return "06-x.pt"
    return {"dot-dot": "..", "empty": "", "backslash": "..\\elsewhere\\precious.txt"}[kind]


def _new_entry() -> reference.Entry:
    """A well-formed entry to store: its own file name is bare, so only the manifest's other entries can refuse it."""
    return reference.Entry("06-y", "j", {}, corpus="c", **AT)


HOSTILE = ["parent", "absolute", "subfolder", "link out", "dot-dot", "empty", "backslash"]


@pytest.mark.parametrize("kind", HOSTILE)
def test_an_entry_naming_a_file_outside_the_folder_is_refused_by_prune_load_and_store(folders, kind):
    where, outside = folders
    name = _hostile_name(where, outside, kind)
    (where / reference.MANIFEST).write_text(json.dumps({"runs": [_entry(name)]}))
    before = files_under(where, outside.parent)
    pattern = r"manifest\.json names the file .* which is not a file inside .*an entry's file is a bare name"
    with pytest.raises(CheckpointError) as err:
        reference.prune("06", since=1e12)
    assert_one_sentence(str(err.value), pattern)
    with pytest.warns(RuntimeWarning) as caught:
        assert reference.load("06-x", "k", VOCAB) is None
    assert_one_sentence(str(caught[0].message), pattern)
    with pytest.raises(CheckpointError):
        reference.store(_new_entry(), RNNLM(LMConfig(3, emb_size=2, hidden_size=2, num_layers=1)), VOCAB, [])
    with pytest.raises(CheckpointError):
        stored_numbers.compute_or_load("06-z", {}, lambda: {"n": 1}, VOCAB, **AT)
    assert files_under(where, outside.parent) == before and outside.read_text() == "keep me\n"


DAMAGED = {
    "not JSON": "{ nope",
    "a list of numbers": "[1, 2, 3]",
    "null": "null",
    "runs is null": '{"runs": null}',
    "runs is a string": '{"runs": "06-x.pt"}',
    "an entry that is a number": '{"runs": [7]}',
    "an entry without file": '{"runs": [{"name": "06-x", "key": "k"}]}',
    "a file that is a number": '{"runs": [{"file": 12}]}',
}


@pytest.mark.parametrize("kind", list(DAMAGED))
def test_a_damaged_manifest_is_named_in_one_sentence_wherever_it_is_read(folders, kind):
    where, _ = folders
    (where / reference.MANIFEST).write_text(DAMAGED[kind])
    before = files_under(where)
    for call in (reference.read_manifest, lambda: reference.prune("06", since=1e12)):
        with pytest.raises(CheckpointError) as err:
            call()
        assert_one_sentence(str(err.value), r"manifest\.json (is not a readable manifest|is not a manifest|has an "
                                            r"entry \(1 of 1\) without the name of its file).*make runs")
    with pytest.warns(RuntimeWarning, match=r"manifest\.json .*afresh"):
        assert reference.load("06-x", "k", VOCAB) is None
    with pytest.raises(CheckpointError):
        reference.store(_new_entry(), RNNLM(LMConfig(3, emb_size=2, hidden_size=2, num_layers=1)), VOCAB, [])
    with pytest.raises(CheckpointError):
        stored_numbers.compute_or_load("06-z", {}, lambda: {"n": 1}, VOCAB, **AT)
    assert files_under(where) == before


def test_runs_without_a_manifest_are_named_not_trained_over_silently(folders):
    where, _ = folders
    (where / "06-x-k.pt").write_bytes(b"a run")
    with pytest.warns(RuntimeWarning) as caught:
        assert reference.load("06-x", "k", VOCAB) is None
    assert_one_sentence(str(caught[0].message), r"holds 1 runs \(06-x-k\.pt, \.\.\.\) but no manifest\.json")


# ------------------------------------------------------------------ stored measurements are sealed

def _numbers(value=2.0):
    return lambda: {"log_p": torch.tensor([-1.5, -value]), "seconds": value, "n": 2}


def _stored(monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(tmp_path / "reference"))
    monkeypatch.setenv(reference.STORE_ENV, "0")
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    stored_numbers.compute_or_load("08-x", {}, _numbers(), VOCAB, **AT)
    return stored_numbers.numbers_path("08-x", {}, VOCAB, **AT)


def _flip_tensor_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(torch.tensor([-1.5]).numpy().tobytes())  # the tensor's bytes, stored raw in the zip
    assert at >= 0
    data[at + 2] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_number(path: Path) -> None:
    payload = torch.load(path, weights_only=True)
    payload["numbers"]["seconds"] = 2.015625  # what one flipped bit of 2.0 reads as
    torch.save(payload, path)


def _unsealed(path: Path) -> None:
    torch.save({"log_p": torch.tensor([-1.5, -2.0]), "seconds": 2.0, "n": 2}, path)


@pytest.mark.parametrize("damage", [_flip_tensor_bit, _edit_number, _unsealed])
def test_a_damaged_stored_measurement_is_computed_afresh_not_read_as_another_number(monkeypatch, tmp_path, damage):
    path = _stored(monkeypatch, tmp_path)
    assert stored_numbers.compute_or_load("08-x", {}, _numbers(9.0), VOCAB, **AT)["seconds"] == 2.0  # loaded
    damage(path)
    with pytest.warns(RuntimeWarning) as caught:
        again = stored_numbers.compute_or_load("08-x", {}, _numbers(3.0), VOCAB, **AT)
    assert not again["loaded"] and again["seconds"] == 3.0
    assert_one_sentence(str(caught[0].message), r"The stored measurement .*08-x-.*\.pt (does not match the checksum "
                                                r"stored with it|cannot be read).*computed afresh")


# ------------------------------------------------------------ a changed corpus is never loaded as this one's


def _folder_corpus(folder: Path) -> Path:
    """A small corpus folder with its own vocab.txt, so that new sentences of the same words keep the vocabulary."""
    from .helpers import small_corpus

    small_corpus(folder)
    words = sorted({w for s in ("train", "valid", "test") for w in (folder / f"{s}.txt").read_text().split()})
    (folder / "vocab.txt").write_text("\n".join(["<eos>", *words]) + "\n")
    return folder


def test_a_run_made_on_an_earlier_version_of_the_corpus_is_trained_again_saying_why(home, capsys, monkeypatch):
    """Issue 42, defect 1: the key hashed only the vocabulary, so a run trained before train.txt (or valid.txt)
    changed was loaded without a word."""
    from .helpers import cli

    monkeypatch.setenv(reference.FOLDER_ENV, str(home / "reference"))  # no committed run of its own
    corpus = _folder_corpus(home / "mine")
    argv = ["word-lstm", "--scale", "cpu", "--data", str(corpus)]

    def run():
        code, out, err = cli(capsys, argv)
        assert code == 0, err
        return json.loads(out.splitlines()[-1]), out

    assert not run()[0]["loaded"] and run()[0]["loaded"]
    lines = (corpus / "train.txt").read_text().splitlines()
    (corpus / "train.txt").write_text("\n".join(lines[::-1]) + "\n")  # other text, the same words and vocabulary
    result, out = run()
    assert not result["loaded"]
    assert "The stored result 'word-lstm' was made from another version of the corpus mine (its files changed " \
           "since), so it is trained afresh." in out.splitlines()
    assert run()[0]["loaded"]  # the new version is stored in its turn
    (corpus / "valid.txt").write_text((corpus / "valid.txt").read_text() * 2)  # only the validation text changes
    result, out = run()
    assert not result["loaded"] and "another version of the corpus mine" in out


def test_an_edit_of_valid_or_test_computes_a_stored_measurement_afresh(folders, monkeypatch, tmp_path, capsys):
    """Issue 42, defect 1: stored numbers still said 7,060 validation tokens after valid.txt held 82,430."""
    from lmcourse.corpora.data import load_corpus

    monkeypatch.setenv(reference.STORE_ENV, "0")
    corpus = _folder_corpus(tmp_path / "mine")
    at = dict(scale="cpu", dataset=str(corpus))

    def measure():
        data = load_corpus(corpus)
        return stored_numbers.compute_or_load("08-tokens", {}, lambda: {"valid": len(data.valid),
                                                                        "test": len(data.test)}, data.vocab, **at)

    first = measure()
    assert not first["loaded"] and measure()["loaded"]
    for split in ("valid", "test"):
        (corpus / f"{split}.txt").write_text((corpus / f"{split}.txt").read_text() * 3)
        capsys.readouterr()
        again = measure()
        assert not again["loaded"] and again[split] == 3 * first[split]
        assert "The stored result '08-tokens' was made from another version of the corpus mine" in capsys.readouterr().out


def test_file_digests_are_remembered_by_identity_and_an_edit_is_always_seen(folders, monkeypatch, tmp_path):
    """The fingerprint is cheap: a large file is hashed once, then known by its identity; any write, even one whose
    modification time is put back (touch -r), is hashed again."""
    from lmcourse.corpora import data

    big = tmp_path / "train.txt"
    big.write_bytes(b"the cat sat\n" * 100_000)  # 1.2 MB: remembered
    hashed = []
    real = data.download.sha256_of
    monkeypatch.setattr(data.download, "sha256_of", lambda path: hashed.append(Path(path).name) or real(path))
    first = data.file_digests([big])[big]
    assert data.file_digests([big])[big] == first and hashed == ["train.txt"]
    stamp = big.stat()
    big.write_bytes(b"the cat sat\n" * 99_999 + b"the dog sat\n")  # same size
    os.utime(big, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # the old modification time put back
    second = data.file_digests([big])[big]
    assert second[0] == first[0] and second[1] != first[1] and hashed == ["train.txt", "train.txt"]


# ------------------------------------------------------------ prune owns only the entries' .pt files


def test_prune_never_deletes_the_manifest_or_a_readme(folders):
    """Issue 42, defect 8: entries naming manifest.json and README.md deleted both."""
    where, _ = folders
    (where / "README.md").write_text("what these runs are\n")
    (where / "06-x-k.pt").write_bytes(b"weights")
    runs = [_entry("06-x-k.pt"), _entry(reference.MANIFEST, name="06-m"), _entry("README.md", name="06-r")]
    (where / reference.MANIFEST).write_text(json.dumps({"runs": runs}))
    before = files_under(where)
    with pytest.raises(CheckpointError) as err:
        reference.prune("06", since=1e12)
    assert_one_sentence(str(err.value), r"manifest\.json names the file 'manifest\.json', which is not a file inside .* "
                                        r"that an entry may own; an entry's file is a bare name ending in \.pt, never "
                                        r"manifest\.json or a README")
    assert files_under(where) == before
    (where / reference.MANIFEST).write_text(json.dumps({"runs": [_entry("06-x-k.pt"), _entry("README.md")]}))
    with pytest.raises(CheckpointError, match="'README.md'"):
        reference.prune("06", since=1e12)
    assert (where / "README.md").is_file() and (where / "06-x-k.pt").is_file()


# ------------------------------------------------------------ LMCOURSE_RETRAIN is a switch


@pytest.mark.parametrize("value, retrains", [("", False), ("0", False), ("false", False), ("no", False),
                                             ("Off", False), ("1", True), ("true", True), ("YES", True)])
def test_the_retrain_switch_reads_false_and_no_as_off(folders, monkeypatch, value, retrains):
    """Issue 42, unclear: LMCOURSE_RETRAIN=false and =no both retrained and replaced the stored run."""
    monkeypatch.setenv(reference.STORE_ENV, "0")
    assert not stored_numbers.compute_or_load("08-s", {}, lambda: {"n": 1}, VOCAB, **AT)["loaded"]
    monkeypatch.setenv("LMCOURSE_RETRAIN", value)
    assert stored_numbers.compute_or_load("08-s", {}, lambda: {"n": 2}, VOCAB, **AT)["loaded"] is not retrains


@pytest.mark.parametrize("variable", ["LMCOURSE_RETRAIN", "LMCOURSE_STORE_REFERENCE"])
def test_a_switch_that_is_neither_on_nor_off_is_refused(folders, monkeypatch, capsys, variable):
    from lmcourse import config
    from lmcourse.cli.main import main

    monkeypatch.setenv(variable, "maybe")
    with pytest.raises(config.ConfigError) as err:
        stored_numbers.compute_or_load("08-s", {}, lambda: {"n": 1}, VOCAB, **AT)
    assert_one_sentence(str(err.value), rf"{variable}='maybe' is not a switch: set it to 1 \(or true, yes, on\), 0 "
                                        r"\(or false, no, off\), or unset it")
    assert main(["data"]) == 2 and f"{variable}='maybe' is not a switch" in capsys.readouterr().err
