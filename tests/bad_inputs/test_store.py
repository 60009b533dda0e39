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
