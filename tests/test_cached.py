"""train_or_load: trains once, loads the same weights after, retrains when a setting changes."""
import torch

from lmcourse import config
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.store import stored_runs as cached
from lmcourse.vocab import Vocab


def _setup(monkeypatch, tmp_path, scale="cpu"):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path))
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    monkeypatch.setattr(config, "SCALE", scale)


def _trainer(calls, vocab, stop="completed"):
    class History:
        rows = [{"epoch": 1, "valid_ppl": 10.0}]
        stop_reason = stop

    def train():
        calls.append(1)
        torch.manual_seed(len(calls))
        model = RNNLM(LMConfig(vocab_size=len(vocab), emb_size=4, hidden_size=4, num_layers=1))
        model.vocab = vocab
        return model, History()
    return train


def test_trains_once_then_loads(monkeypatch, tmp_path, capsys):
    _setup(monkeypatch, tmp_path)
    vocab, calls = Vocab(["<eos>", "a", "b"]), []
    first = cached.train_or_load("demo", {"h": 4}, _trainer(calls, vocab), vocab)
    second = cached.train_or_load("demo", {"h": 4}, _trainer(calls, vocab), vocab)
    assert len(calls) == 1 and not first.loaded and second.loaded
    assert "Loaded the finished run 'demo'" in capsys.readouterr().out
    assert second.history == [{"epoch": 1, "valid_ppl": 10.0}]
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a.cpu(), b.cpu())
    cached.train_or_load("demo", {"h": 5}, _trainer(calls, vocab), vocab)  # another setting: trains
    cached.train_or_load("demo", {"h": 4}, _trainer(calls, vocab), vocab, retrain=True)
    assert len(calls) == 3


def test_unfinished_runs_and_ci_scale_are_not_reused(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path)
    vocab, calls = Vocab(["<eos>", "a"]), []
    cached.train_or_load("cut", {}, _trainer(calls, vocab, stop="interrupted"), vocab)
    cached.train_or_load("cut", {}, _trainer(calls, vocab), vocab)
    assert len(calls) == 2
    _setup(monkeypatch, tmp_path / "ci", scale="ci")
    run = cached.train_or_load("ci", {}, _trainer(calls, vocab), vocab)
    assert run.path is None and not (tmp_path / "ci" / "runs").exists()


def test_bad_name_is_one_sentence():
    import pytest
    with pytest.raises(ValueError, match="plain file name"):
        cached.run_path("../x", {}, Vocab(["<eos>", "a"]))


def test_a_damaged_stored_run_is_trained_again(monkeypatch, tmp_path):
    import pytest
    _setup(monkeypatch, tmp_path)
    vocab, calls = Vocab(["<eos>", "a"]), []
    first = cached.train_or_load("hurt", {}, _trainer(calls, vocab), vocab)
    first.path.write_bytes(b"not a checkpoint")
    with pytest.warns(RuntimeWarning, match="cannot be used"):
        again = cached.train_or_load("hurt", {}, _trainer(calls, vocab), vocab)
    assert len(calls) == 2 and not again.loaded


def test_a_run_on_another_corpus_is_not_loaded(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path)
    calls = []
    old, new = Vocab(["<eos>", "a"]), Vocab(["<eos>", "a", "b"])
    cached.train_or_load("shared", {"h": 4}, _trainer(calls, old), old)
    assert cached.train_or_load("shared", {"h": 4}, _trainer(calls, old), old).loaded
    again = cached.train_or_load("shared", {"h": 4}, _trainer(calls, new), new)
    assert not again.loaded and len(calls) == 2
    monkeypatch.setattr(cached, "EMBEDDED_FORMAT", cached.EMBEDDED_FORMAT + 1)  # the corpus's text changed
    bumped = cached.train_or_load("shared", {"h": 4}, _trainer(calls, new), new)
    assert not bumped.loaded and len(calls) == 3


def test_a_missing_vocabulary_is_one_sentence():
    import pytest
    with pytest.raises(TypeError, match="needs the corpus's Vocab"):
        cached.run_path("x", {}, ["<eos>", "a"])
