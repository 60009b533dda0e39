"""lmcourse.training.checkpoint: a damaged, hostile or misplaced checkpoint is one sentence; what is read
back is what was written; a write that fails keeps the old file."""
import errno
import pickle
from pathlib import Path

import pytest
import torch

from lmcourse import checksum
from lmcourse.adapt.dyneval import DynamicEval
from lmcourse.corpora import data
from lmcourse.errors import CheckpointError, LMCourseError, MissingFileError, NoSpaceError, WriteError
from lmcourse.networks.generate import sampling_distribution
from lmcourse.networks.models import LMConfig, RNNLM
from lmcourse.training import checkpoint
from lmcourse.training.checkpoint import check_writable, load_checkpoint, save_checkpoint
from lmcourse.training.rundir import RunDir
from lmcourse.vocab import Vocab

from .helpers import (
    assert_one_sentence,
    cli,
    copy_run,
    files_under,
    small_corpus,
    tiny_model,
    train_argv,
    WORDS,
)

# ------------------------------------------------------------------------------------- checkpoints


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


# -------------------------------------------------------------------------------- writes that fail


def test_a_disk_that_fills_during_the_write_is_one_sentence_and_keeps_the_old_file(tmp_path, monkeypatch):
    save_checkpoint(tmp_path / "model.pt", tiny_model())
    before = files_under(tmp_path)
    free = iter([10**9, 2000])  # room before the write, none after it failed

    def full(obj, f):
        f.write(b"PK\x03\x04" + bytes(100))
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4224 vs 4122")
    monkeypatch.setattr(checkpoint.torch, "save", full)
    monkeypatch.setattr(checksum, "free_bytes", lambda folder: next(free, 2000))
    with pytest.raises(NoSpaceError) as err:
        save_checkpoint(tmp_path / "model.pt", tiny_model())
    assert_one_sentence(str(err.value), r"No space left on the disk of .* to write model\.pt \(needed about [0-9.]+ "
                                        r"kB, 2\.0 kB free\): free some space, or write to another folder")
    assert files_under(tmp_path) == before  # the old file whole, the partial temporary one gone


def test_a_disk_without_room_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(checksum, "free_bytes", lambda folder: 1000)
    with pytest.raises(NoSpaceError) as err:
        save_checkpoint(tmp_path / "model.pt", tiny_model())
    assert_one_sentence(str(err.value), r"No space left on the disk of .* to write model\.pt \(needed about [0-9.]+ "
                                        r"kB, 1\.0 kB free\)")
    assert list(tmp_path.iterdir()) == []


def test_train_on_a_full_disk_says_so(home, capsys, trained, monkeypatch):
    monkeypatch.setattr(checksum, "free_bytes", lambda folder: 0)
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


# -------------------------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
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


def test_a_file_size_limit_is_one_sentence_not_torchs_message(tmp_path):
    """Issue 42, unclear: a file-size limit (ulimit -f) showed torch's internal "enforce fail" message."""
    resource = pytest.importorskip("resource")
    path = save_checkpoint(tmp_path / "model.pt", tiny_model())
    before = files_under(tmp_path)
    big = RNNLM(LMConfig(vocab_size=2000, emb_size=64, hidden_size=64, num_layers=1))  # about 1 MB of weights
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100 * 1024, hard))
    try:
        with pytest.raises(WriteError) as refused:  # its size is known: refused before a byte is written
            save_checkpoint(path, big)
        with pytest.raises(WriteError) as failed:  # its size unknown: torch's writer fails at the limit
            checksum.atomic_write(path, lambda f: torch.save(big.state_dict(), f))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    for err in (refused, failed):
        assert_one_sentence(str(err.value), r"model\.pt cannot be written: it is larger than this shell's file-size "
                                            r"limit of 0\.1 MB \(ulimit -f\), so the file was left as it was; raise the "
                                            r"limit")
        assert "enforce" not in str(err.value)
    assert files_under(tmp_path) == before
