"""The checksum every saved file carries: equal structures agree, any change to one disagrees, and a
sealed payload survives torch.save / torch.load (weights_only) with its checksum still matching."""
import io
import os
import re
import stat
from pathlib import Path

import pytest
import torch

from lmcourse.checksum import KEY, digest, seal, verify


def payload():
    g = torch.Generator().manual_seed(0)
    return {"format": 2, "config": {"hidden_size": 8, "tie": True, "last_size": None, "lr": 0.5},
            "state_dict": {"w": torch.randn(3, 4, generator=g), "b": torch.zeros(4, dtype=torch.float64)},
            "vocab": ["<eos>", "the", "cat"], "optimizer": {0: {"step": torch.tensor(3.0)}, "groups": [(0.9, 0.99)]},
            "rng": torch.ByteTensor([1, 2, 3]), "empty": torch.zeros(0, 5)}


def next_float(x: torch.Tensor) -> None:
    x.copy_(torch.nextafter(x, x + 1))


def test_equal_structures_have_equal_checksums_whatever_the_key_order():
    a = payload()
    b = dict(reversed(list(payload().items())))
    assert digest(a) == digest(b) and len(digest(a)) == 64


@pytest.mark.parametrize("change", [
    lambda p: next_float(p["state_dict"]["w"].view(-1)[5:6]),        # one weight, by one rounding step
    lambda p: p["state_dict"]["w"].view(torch.int32).view(-1)[0].bitwise_xor_(1),  # one bit
    lambda p: p["state_dict"].update(w=p["state_dict"]["w"].reshape(4, 3)),        # the same bytes, another shape
    lambda p: p["state_dict"].update(b=p["state_dict"]["b"].float()),              # the same values, another dtype
    lambda p: p["config"].update(hidden_size=8.0),                                 # an int become a float
    lambda p: p["config"].update(tie=1),                                           # a bool become an int
    lambda p: p["config"].update(last_size=0),
    lambda p: p["vocab"].__setitem__(1, "tha"),
    lambda p: p["vocab"].append(""),
    lambda p: p.update(empty=torch.zeros(5, 0)),
    lambda p: p["optimizer"].update({1: p["optimizer"].pop(0)}),                   # a key renamed
    lambda p: p.update(rng=torch.ByteTensor([1, 2, 4])),
], ids=["a weight", "a bit", "a shape", "a dtype", "int to float", "bool to int", "None to 0", "a word",
        "a word more", "an empty shape", "a key", "a random state"])
def test_any_change_changes_the_checksum(change):
    p = payload()
    before = digest(p)
    change(p)
    assert digest(p) != before


def test_a_sealed_payload_round_trips_through_torch_save():
    sealed = seal(payload())
    assert KEY in sealed and KEY not in payload() and verify(sealed)
    buffer = io.BytesIO()
    torch.save(sealed, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert verify(loaded)
    loaded["state_dict"]["w"][0, 0] += 1
    assert not verify(loaded)


@pytest.mark.parametrize("thing", [None, [], "text", {"format": 2}, {KEY: 5, "a": 1}, {KEY: "0" * 64, "a": 1},
                                   {KEY: "x", "a": object()}])
def test_anything_but_a_sealed_dict_fails_verification(thing):
    assert verify(thing) is False


def test_only_plain_data_and_tensors_are_covered():
    with pytest.raises(TypeError, match="tensors and plain data only, got object"):
        digest({"a": object()})


# ------------------------------------------------------------------ the one atomic write


def test_two_writers_of_one_file_never_share_a_temporary_name(tmp_path):
    """Each write gets its own temporary file beside the target (a fixed name would let one writer rename or cut
    the other's half-written file)."""
    from lmcourse.checksum import atomic_write

    target = tmp_path / "page.html"
    seen = []

    def outer(f):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        f.write(b"outer ")
        atomic_write(target, lambda g: seen.append(sorted(p.name for p in tmp_path.iterdir())) or g.write(b"inner"))
        f.write(b"whole")

    atomic_write(target, outer)
    assert len(seen[0]) == 1 and len(seen[1]) == 2 and seen[0][0] in seen[1]  # two temporaries at once
    assert all(re.fullmatch(r"\.page\.html\..+\.tmp", name) for name in seen[1])
    assert target.read_bytes() == b"outer whole" and [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_durable_write_reaches_the_disk_and_a_cache_need_not(tmp_path, monkeypatch):
    from lmcourse import checksum

    synced = []
    real = os.fsync
    monkeypatch.setattr(checksum.os, "fsync", lambda fd: synced.append(fd) or real(fd))
    checksum.atomic_write(tmp_path / "manifest.json", "{}")
    assert len(synced) == 2  # the file, then the folder that names it
    synced.clear()
    checksum.atomic_write(tmp_path / "cache.json", "{}", durable=False)
    assert synced == []


def test_a_new_file_gets_the_umask_and_a_replaced_one_keeps_its_mode(tmp_path):
    from lmcourse.checksum import atomic_write

    old = os.umask(0o027)
    try:
        assert stat.S_IMODE(atomic_write(tmp_path / "new.txt", "x").stat().st_mode) == 0o640
        (tmp_path / "kept.txt").write_text("x")
        (tmp_path / "kept.txt").chmod(0o604)
        assert stat.S_IMODE(atomic_write(tmp_path / "kept.txt", "y").stat().st_mode) == 0o604
        (tmp_path / "link.txt").symlink_to(tmp_path / "kept.txt")
        atomic_write(tmp_path / "link.txt", "z")  # the link is replaced, never followed
        assert (tmp_path / "kept.txt").read_text() == "y" and not (tmp_path / "link.txt").is_symlink()
    finally:
        os.umask(old)


# Where a module may still open a file for writing, rename one or make a temporary one itself: the one atomic
# write, probes and scratch files it deletes, renames of whole files or folders, and streams that are not documents.
ALLOWED_WRITES = {
    "lmcourse/checksum.py": ["tempfile.mkstemp(", "os.replace(tmp, path)"],
    "lmcourse/training/checkpoint.py": ["tempfile.mkstemp(prefix=f\".{path.name}.\", suffix=\".probe\"",
                                        "tempfile.mkstemp(prefix=\".write-test.\""],
    "lmcourse/corpora/download.py": ["tempfile.mkstemp(prefix=f\".{dest.name}.\", suffix=\".part\"",
                                     "with open(path, \"wb\") as f:"],
    "lmcourse/corpora/embedded.py": ["os.replace(tmp, folder)"],
    "lmcourse/authoring/deck.py": ["os.replace(Path(tmp) / \"reveal\", home)"],
    "lmcourse/authoring/lessons.py": ["with open(os.devnull, \"w\") as quiet:"],
    "lmcourse/course/results.py": ["os.replace(self.path, aside)"],
    "lmcourse/cli/reproduce.py": ["os.replace(self.out / name, self.folder / name)", "os.replace(path, self.out / "
                                                                                      "path.name)"],
    "lmcourse/store/reference_runs.py": ["os.replace(source, path)"],
    "benchmarks/bench_mos.py": ["with open(\"/proc/self/clear_refs\", \"w\") as f:"],
    "benchmarks/bench_dyneval_memory.py": ["with open(\"/proc/self/clear_refs\", \"w\") as f:"],
    "benchmarks/gpu_check.py": ["with open(log, \"w\") as sink:"],
}
WRITES = re.compile(r"\.write_text\(|\.write_bytes\(|\bopen\([^)\n]*[\"'][wax]b?\+?[\"']|mkstemp\(|os\.replace\(|"
                    r"os\.rename\(|nbformat\.write\(|savefig\((?!buffer)|\.touch\(")


def test_every_file_the_package_and_its_tools_write_goes_through_the_one_atomic_write():
    """No module writes a document itself: every one goes through lmcourse.checksum.atomic_write (a unique temporary
    name, flushed, renamed whole, the user's umask); what is left here is listed in ALLOWED_WRITES with its reason."""
    root = Path(__file__).resolve().parents[1]
    found = []
    for path in sorted([*root.joinpath("lmcourse").rglob("*.py"), *root.joinpath("benchmarks").rglob("*.py")]):
        rel = path.relative_to(root).as_posix()
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.split("#")[0]
            if WRITES.search(code) and not any(allowed in code for allowed in ALLOWED_WRITES.get(rel, [])):
                found.append(f"{rel}: {line.strip()}")
    assert found == []
