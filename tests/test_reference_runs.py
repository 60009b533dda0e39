"""The reference runs committed in reference_runs/: looked up first, half precision, checked by sha256,
regenerated only on request, and still the lessons' own (settings, corpus, size)."""
import json
from pathlib import Path

import pytest
import torch

from lmcourse import config
from lmcourse.course import registry
from lmcourse.networks.models import RNNLM, LMConfig
from lmcourse.store import reference_runs as reference
from lmcourse.store import stored_runs
from lmcourse.vocab import Vocab

ROOT = Path(__file__).resolve().parent.parent
AT = dict(scale="cpu", dataset="embedded")  # the key parts the store is given (it reads no global)

VOCAB = Vocab(["<eos>", "a", "b", "c"])
X = torch.tensor([[1, 2, 3, 1, 2]]).T  # (T, B)


def _setup(monkeypatch, tmp_path, store=False):
    monkeypatch.setenv("LMCOURSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(reference.FOLDER_ENV, str(tmp_path / "reference"))
    monkeypatch.delenv("LMCOURSE_RETRAIN", raising=False)
    monkeypatch.delenv("LMCOURSE_RETRAIN_LESSONS", raising=False)
    monkeypatch.setenv(reference.STORE_ENV, "1" if store else "0")
    monkeypatch.setattr(config, "SCALE", "cpu")


def _trainer(calls, seed=0):
    class History:
        rows = [{"epoch": 1, "valid_ppl": 9.0}, {"epoch": 2, "valid_ppl": 8.0}]
        stop_reason = "completed"

    def train():
        calls.append(seed)
        torch.manual_seed(seed)
        model = RNNLM(LMConfig(vocab_size=len(VOCAB), emb_size=6, hidden_size=6, num_layers=1))
        model.vocab = VOCAB
        return model, History()
    return train


def _logits(model):
    with torch.no_grad():
        return model.score(X[:, 0]).float()


def test_a_stored_reference_run_is_loaded_first_in_half_precision(monkeypatch, tmp_path, capsys):
    _setup(monkeypatch, tmp_path, store=True)
    calls = []
    trained = stored_runs.train_or_load("06-demo", {"d": 6}, _trainer(calls), VOCAB, **AT)
    entry, = reference.read_manifest()
    assert entry["name"] == "06-demo" and entry["lesson"] == "06" and entry["settings"] == {"d": 6}
    assert entry["sha256"] == reference.sha256(tmp_path / "reference" / entry["file"])
    stored = torch.load(tmp_path / "reference" / entry["file"], weights_only=False)
    assert {t.dtype for t in stored["state_dict"].values() if t.is_floating_point()} == {torch.float16}
    monkeypatch.setenv(reference.STORE_ENV, "0")
    for path in (tmp_path / "cache").rglob("*.pt"):  # only the committed copy is left
        path.unlink()
    loaded = stored_runs.train_or_load("06-demo", {"d": 6}, _trainer(calls), VOCAB, **AT)
    assert calls == [0] and loaded.loaded and [r["epoch"] for r in loaded.history] == [1, 2]
    assert "stored reference run '06-demo'" in capsys.readouterr().out
    assert next(loaded.model.parameters()).dtype == torch.float32
    assert torch.allclose(_logits(trained.model), _logits(loaded.model), atol=2e-3)  # fp16 rounding of weights


def test_storing_copies_a_finished_run_of_the_users_cache(monkeypatch, tmp_path, capsys):
    _setup(monkeypatch, tmp_path, store=False)
    calls = []
    trained = stored_runs.train_or_load("09-demo", {"d": 6}, _trainer(calls), VOCAB, **AT)
    assert reference.read_manifest() == []
    monkeypatch.setenv(reference.STORE_ENV, "1")  # `make runs` reading what the user already trained
    loaded = stored_runs.train_or_load("09-demo", {"d": 6}, _trainer(calls), VOCAB, **AT)
    assert calls == [0] and loaded.loaded
    entry, = reference.read_manifest()
    assert entry["name"] == "09-demo" and entry["lesson"] == "09" and entry["epochs"] == 2
    monkeypatch.setenv(reference.STORE_ENV, "0")
    for path in (tmp_path / "cache").rglob("*.pt"):
        path.unlink()
    again = stored_runs.train_or_load("09-demo", {"d": 6}, _trainer(calls), VOCAB, **AT)
    assert calls == [0] and "stored reference run '09-demo'" in capsys.readouterr().out
    assert torch.allclose(_logits(again.model), _logits(trained.model), atol=2e-3)


def test_the_reference_run_comes_before_the_users_own(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    committed = stored_runs.train_or_load("07-order", {}, _trainer([], seed=1), VOCAB, **AT)
    monkeypatch.setenv(reference.STORE_ENV, "0")
    # the user's cache now holds another model under the same key
    other, _ = _trainer([], seed=2)()
    from lmcourse.training.checkpoint import save_checkpoint
    save_checkpoint(stored_runs.run_path("07-order", {}, VOCAB, **AT), other, VOCAB, [], {"complete": True})
    loaded = stored_runs.train_or_load("07-order", {}, _trainer([]), VOCAB, **AT)
    assert torch.allclose(_logits(loaded.model), _logits(committed.model), atol=2e-3)
    assert not torch.allclose(_logits(loaded.model), _logits(other), atol=2e-3)


def test_a_damaged_reference_run_is_named_and_trained_afresh(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    stored_runs.train_or_load("08-bad", {}, _trainer([]), VOCAB, **AT)
    monkeypatch.setenv(reference.STORE_ENV, "0")
    entry, = reference.read_manifest()
    path = tmp_path / "reference" / entry["file"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit
    path.write_bytes(bytes(data))
    for cached in (tmp_path / "cache").rglob("*.pt"):
        cached.unlink()
    calls = []
    with pytest.warns(RuntimeWarning, match=r"reference run .*08-bad.* does not match the sha256") as said:
        run = stored_runs.train_or_load("08-bad", {}, _trainer(calls), VOCAB, **AT)
    assert calls == [0] and not run.loaded
    from lmcourse.authoring.outputs import MACHINE_PATH
    assert not [str(w.message) for w in said if MACHINE_PATH.search(str(w.message))]  # a lesson saves no folder of ours


def test_retraining_never_writes_into_the_reference_folder_unless_asked(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    stored_runs.train_or_load("09-demo", {"s": 1}, _trainer([]), VOCAB, **AT)
    before = reference.read_manifest()
    monkeypatch.setenv(reference.STORE_ENV, "0")
    monkeypatch.setenv("LMCOURSE_RETRAIN", "1")
    calls = []
    run = stored_runs.train_or_load("09-demo", {"s": 1}, _trainer(calls), VOCAB, **AT)
    assert calls == [0] and not run.loaded and reference.read_manifest() == before


def test_regenerating_a_lesson_retrains_its_own_runs_and_loads_another_lessons(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    stored_runs.train_or_load("09-shared", {"s": 1}, _trainer([]), VOCAB, **AT)
    stored_runs.train_or_load("03-own", {"s": 1}, _trainer([]), VOCAB, **AT)
    monkeypatch.setenv("LMCOURSE_RETRAIN", "1")
    monkeypatch.setenv("LMCOURSE_RETRAIN_LESSONS", "03")  # what `make runs LESSONS=03` sets
    shared, own = [], []
    assert stored_runs.train_or_load("09-shared", {"s": 1}, _trainer(shared), VOCAB, **AT).loaded and shared == []
    assert not stored_runs.train_or_load("03-own", {"s": 1}, _trainer(own), VOCAB, **AT).loaded and own == [0]
    # a run filed under another lesson than its name says follows its entry's lesson
    stored_runs.train_or_load("course-demo", {"s": 1}, _trainer([]), VOCAB, lesson="09", **AT)
    again = []
    assert stored_runs.train_or_load("course-demo", {"s": 1}, _trainer(again), VOCAB, lesson="09", **AT).loaded
    monkeypatch.setenv("LMCOURSE_RETRAIN_LESSONS", "09")
    assert not stored_runs.train_or_load("course-demo", {"s": 1}, _trainer(again), VOCAB, lesson="09", **AT).loaded
    assert again == [0]


def test_prune_removes_what_a_regeneration_no_longer_made(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    stored_runs.train_or_load("04-old", {"seed": 0}, _trainer([]), VOCAB, **AT)
    stored_runs.train_or_load("05-keep", {"seed": 0}, _trainer([]), VOCAB, **AT)
    since = max(r["saved_at"] for r in reference.read_manifest()) + 1
    removed = reference.prune("04", since)
    assert len(removed) == 1 and removed[0].startswith("04-old")
    assert [r["name"] for r in reference.read_manifest()] == ["05-keep"]
    assert not (tmp_path / "reference" / removed[0]).exists()


def test_a_lettered_lessons_runs_are_its_own(monkeypatch, tmp_path):
    _setup(monkeypatch, tmp_path, store=True)
    stored_runs.train_or_load("02b-demo", {"seed": 0}, _trainer([]), VOCAB, **AT)
    stored_runs.train_or_load("02-demo", {"seed": 0}, _trainer([]), VOCAB, **AT)
    assert {r["name"]: r["lesson"] for r in reference.read_manifest()} == {"02b-demo": "02b", "02-demo": "02"}
    since = max(r["saved_at"] for r in reference.read_manifest()) + 1
    assert [f.split("-")[0] for f in reference.prune("02", since)] == ["02"]
    assert [r["name"] for r in reference.read_manifest()] == ["02b-demo"]


@pytest.fixture
def demo(monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", {})
    registry.declare("06-demo", lambda scale: [{"d": 6, "seed": s} for s in range(2)])
    return registry.REGISTRY


def _entry(settings, corpus="fp", name="06-demo", scale="cpu"):
    return {"file": f"{name}-x.pt", "lesson": name[:2], "name": name, "settings": settings, "scale": scale,
            "dataset": "embedded", "corpus": corpus}


def test_the_check_names_a_run_whose_settings_or_corpus_moved(demo, tmp_path):
    fp = {"embedded": "fp"}
    assert registry.problems([_entry({"d": 6, "seed": 1})], fp, where=tmp_path) == []
    moved = registry.problems([_entry({"d": 8, "seed": 1})], fp, where=tmp_path)
    assert len(moved) == 1 and "settings lesson 06 no longer uses" in moved[0] and "make runs LESSONS=06" in moved[0]
    corpus = registry.problems([_entry({"d": 6, "seed": 0}, corpus="old")], fp, where=tmp_path)
    assert len(corpus) == 1 and "another version of the embedded corpus" in corpus[0]
    unknown = registry.problems([_entry({}, name="07-nobody")], fp, where=tmp_path)
    assert len(unknown) == 1 and "no lesson declares" in unknown[0]


def test_the_check_enforces_the_size_budget(demo, tmp_path):
    (tmp_path / "big.pt").write_bytes(b"\0" * 2000)
    over = registry.problems([], {}, budget=1000, where=tmp_path)
    assert len(over) == 1 and "over the course's budget" in over[0]
    assert registry.problems([], {}, budget=10_000, where=tmp_path) == []


def test_a_run_name_is_declared_once(demo):
    with pytest.raises(ValueError, match="declared twice"):
        registry.declare("06-demo", lambda scale: [])
    with pytest.raises(KeyError, match="No lesson declares"):
        registry.settings("99-none", "cpu")
    assert registry.settings("06-demo", "cpu")[1] == {"d": 6, "seed": 1}


def test_the_committed_reference_runs_are_still_the_lessons():
    """The real folder: every committed run is declared, trained with today's settings and corpus, in budget."""
    found = registry.problems()
    assert not found, "\n".join(found)
    manifest = json.loads((reference.folder() / reference.MANIFEST).read_text())
    listed = {r["file"] for r in manifest["runs"]}
    on_disk = {p.name for p in reference.folder().glob("*.pt")}
    assert on_disk == listed, f"files and manifest differ: {sorted(on_disk ^ listed)}; run `make runs`."


def test_make_runs_picks_the_lessons_that_store_runs(tmp_path):
    from lmcourse.authoring import lessons
    for name in ("01_a.ipynb", "02_b.ipynb", "02b_c.ipynb", "07_d.ipynb", "08_e.ipynb"):
        (tmp_path / name).write_text('{"cells": [{"source": "print(1)"}]}')
    chosen = lessons.with_runs(lessons.lessons(folder=tmp_path))
    assert [p.name for p in chosen] == ["02b_c.ipynb", "08_e.ipynb"]  # the owners of declared runs, as the registry says


def test_a_run_on_another_corpus_is_checked_on_that_corpus(demo, monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "LEVELS", {})
    registry.declare("02b-chars", lambda scale: [{"corpus": "plays", "d": 1}], level="char")
    fp = {("plays", "char"): "abc", "embedded": "zzz"}
    entry = {"file": "02b-chars-x.pt", "lesson": "02b", "name": "02b-chars", "settings": {"corpus": "plays", "d": 1},
             "scale": "cpu", "dataset": "embedded", "corpus": "abc"}
    assert registry.problems([entry], fp, where=tmp_path) == []
    moved = registry.problems([dict(entry, corpus="zzz")], fp, where=tmp_path)
    assert len(moved) == 1 and "another version of the plays corpus" in moved[0]


def test_a_committed_run_is_rekeyed_without_retraining(monkeypatch, tmp_path):
    """Renamed settings give a new key: the file moves to it, bytes and sha256 kept, and loads under the new key."""
    _setup(monkeypatch, tmp_path, store=True)
    calls = []
    stored_runs.train_or_load("06-demo", {"emb": 4}, _trainer(calls), VOCAB, **AT)
    old = reference.read_manifest()[0]
    key = stored_runs.run_key("06-demo", {"emb_size": 4}, VOCAB, "cpu", "embedded")
    entry = reference.Entry("06-demo", key, {"emb_size": 4}, "cpu", "embedded", old["corpus"])
    path = reference.rekey(old["file"], entry)
    new = reference.read_manifest()
    assert [r["file"] for r in new] == [path.name] and not (reference.folder() / old["file"]).exists()
    assert new[0]["sha256"] == old["sha256"] == reference.sha256(path) and new[0]["settings"] == {"emb_size": 4}
    loaded = stored_runs.train_or_load("06-demo", {"emb_size": 4}, _trainer(calls), VOCAB, **AT)
    assert loaded.loaded and loaded.path == path and len(calls) == 1
    with pytest.raises(Exception, match="not in"):
        reference.rekey("nothing.pt", entry)


# ----------------------------------------------------------------------- committed runs that cannot be found

@pytest.fixture
def no_announcement_yet(monkeypatch):
    monkeypatch.setattr(reference, "_announced", set())


def test_missing_runs_are_said_once_with_their_cost_before_anything_trains(monkeypatch, tmp_path, capsys,
                                                                          no_announcement_yet):
    _setup(monkeypatch, tmp_path)  # the reference folder holds nothing: no manifest
    said_before_training = []

    def train():
        said_before_training.append(capsys.readouterr().out)
        return _trainer([])()

    stored_runs.train_or_load("course-model", {"d": 6}, train, VOCAB, **AT)
    stored_runs.train_or_load("06-mos-d4-k4-seed1", {"d": 6}, train, VOCAB, **AT)
    first, second = said_before_training
    assert first.count("\n") == 1 and second == "", "one sentence, before the first training only"
    assert str(tmp_path / "reference") in first and "holds no manifest.json" in first
    assert "starting with 'course-model': about 2.5 minutes of one CPU core" in first
    assert (f"at cpu: about {reference.course_minutes('embedded') / 60:.1f} hours on the embedded corpus, "
            f"{reference.course_minutes('real text') / 60:.1f} on real text" in first)
    assert first.rstrip().endswith("to load them in seconds instead.")


def test_nothing_is_said_where_the_runs_are_or_at_a_scale_never_committed(monkeypatch, tmp_path, capsys,
                                                                        no_announcement_yet):
    _setup(monkeypatch, tmp_path)
    stored_runs.train_or_load("06-demo", {"d": 6}, _trainer([]), VOCAB, scale="ci", dataset="embedded")
    stored_runs.train_or_load("06-demo", {"d": 6}, _trainer([]), VOCAB, retrain=True, **AT)  # asked to train
    assert "committed runs are not here" not in capsys.readouterr().out
    reference.write_manifest([], tmp_path / "reference")  # a manifest, without this run: a knob was changed
    stored_runs.train_or_load("06-demo", {"d": 7}, _trainer([]), VOCAB, **AT)
    assert "committed runs are not here" not in capsys.readouterr().out


def test_missing_measurements_are_said_before_they_are_computed(monkeypatch, tmp_path, capsys, no_announcement_yet):
    from lmcourse.store.stored_numbers import compute_or_load

    _setup(monkeypatch, tmp_path)
    said = []
    compute_or_load("08-dyneval", {"lr": 1}, lambda: said.append(capsys.readouterr().out) or {"x": 1.0}, VOCAB, **AT)
    assert "starting with '08-dyneval': about 2 minutes of one CPU core" in said[0]


def test_every_committed_run_has_a_cost_that_its_history_bears_out():
    """CPU_COST's counts are the manifest's, and its minutes lie within a factor of 2.5 of the mean time the
    committed runs' training histories recorded (elapsed_s of their last epoch), where they record one."""
    runs = reference.read_manifest()
    counted: dict = {}
    for entry in runs:
        found = reference.cost(entry["name"])
        assert found is not None, f"{entry['name']} has no entry in reference_runs.CPU_COST: add its cost"
        key = max((k for k in reference.CPU_COST if entry["name"] == k or entry["name"].startswith(k + "-")), key=len)
        counted.setdefault(key, []).append(entry)
    assert {k: len(v) for k, v in counted.items()} == {k: n for k, (n, _) in reference.CPU_COST.items()}
    for key, entries in counted.items():
        seconds = []
        for entry in entries:
            stored = torch.load(reference.folder() / entry["file"], map_location="cpu", weights_only=True)
            history = stored.get("history") or (stored.get("numbers") or {}).get("history")
            if isinstance(history, list) and history and isinstance(history[-1], dict) and "elapsed_s" in history[-1]:
                seconds.append(float(history[-1]["elapsed_s"]))
        if seconds:
            measured = sum(seconds) / len(seconds) / 60
            stated = reference.CPU_COST[key][1]
            assert measured / 2.5 <= stated <= measured * 2.5, f"{key}: {stated} minutes stated, {measured:.1f} measured"
    # the embedded corpus's track regenerates in an afternoon; the real-text track is stated on its own
    assert 1.5 < reference.course_minutes("embedded") / 60 < 4
    assert reference.course_minutes() == reference.course_minutes("embedded") + reference.course_minutes("real text")
    assert set(reference.REAL_TEXT) <= set(reference.CPU_COST), "every real-text run has a cost"


def test_the_students_guide_states_what_each_track_of_runs_costs():
    """docs/students.md says what the runs cost per track, in the hours CPU_COST gives (it cannot go stale)."""
    text = " ".join((ROOT / "docs" / "students.md").read_text().split())
    for track, where in (("embedded", "on the embedded corpus"), ("real text", "on real text")):
        hours = f"about {reference.course_minutes(track) / 60:.1f} hours at `cpu` {where}"
        assert hours in text, f"docs/students.md should say '{hours}' (reference_runs.CPU_COST)"


# ----------------------------------------------------------------------- re-keying after the fingerprint changed

def _corpus_folder(folder):
    folder.mkdir(parents=True)
    for split, text in (("train", "a b c a b\nc a\n"), ("valid", "a c b\n"), ("test", "b a c\n")):
        (folder / f"{split}.txt").write_text(text)
    (folder / "vocab.txt").write_text("<eos>\na\nb\nc\n")  # the four tokens of VOCAB's models
    return folder


def test_rekey_corpus_files_runs_of_the_earlier_fingerprint_under_the_new_key(monkeypatch, tmp_path, capsys):
    """After the fingerprint came to cover every file of the corpus, the committed runs are re-keyed, not retrained;
    one whose corpus changed since is left and named."""
    from lmcourse.corpora.data import load_corpus

    _setup(monkeypatch, tmp_path, store=True)
    same, moved_on = _corpus_folder(tmp_path / "same"), _corpus_folder(tmp_path / "moved-on")
    calls = []
    for folder in (same, moved_on):  # stored as the earlier rule keyed them: by the vocabulary alone
        earlier = Vocab(load_corpus(folder).vocab.itos)
        stored_runs.train_or_load("06-demo", {"d": 6}, _trainer(calls), earlier, scale="cpu", dataset=str(folder))
    (moved_on / "vocab.txt").write_text("<eos>\nb\na\nc\n")  # changed after its run was trained
    before = {r["file"]: r for r in reference.read_manifest()}
    assert registry.main(["rekey", "--dry-run"]) == 1 and reference.read_manifest() == list(before.values())
    moved, refused = registry.rekey_corpus()
    assert len(moved) == 1 and len(refused) == 1 and "was not made from today's 06-demo corpus" in refused[0]
    rows = {r["dataset"]: r for r in reference.read_manifest()}
    now = load_corpus(same).vocab
    assert rows[str(same)]["corpus"] == stored_runs.corpus_fingerprint(now) != before[moved[0][0]]["corpus"]
    assert rows[str(same)]["sha256"] == before[moved[0][0]]["sha256"]  # the same bytes, under the new key
    loaded = stored_runs.train_or_load("06-demo", {"d": 6}, _trainer(calls), now, scale="cpu", dataset=str(same))
    assert loaded.loaded and calls == [0, 0]
    assert registry.rekey_corpus() == ([], refused)  # a second pass changes nothing
    capsys.readouterr()
    retrained = stored_runs.train_or_load("06-demo", {"d": 6}, _trainer(calls), load_corpus(moved_on).vocab,
                                          scale="cpu", dataset=str(moved_on))
    assert not retrained.loaded and calls == [0, 0, 0]
    assert "The committed result '06-demo' was made from another version of the corpus moved-on (its files changed " \
           "since), so it is trained afresh." in capsys.readouterr().out
