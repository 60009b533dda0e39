"""lmcourse.training.rundir and lock: a run folder holds one run, whole; a torchrun process that stops is named."""
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lmcourse.errors import RunDirError
from lmcourse.training.checkpoint import save_checkpoint
from lmcourse.training.rundir import LOCK
from lmcourse.training.trainer import TrainConfig, Trainer

from .helpers import (
    assert_one_sentence,
    child_env,
    cli,
    copy_run,
    files_under,
    held_elsewhere,
    HOLD,
    tiny_model,
    train_argv,
)

# ------------------------------------------------------------ a run directory holds one run, whole


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


# --------------------------------------------------------------- a process of a torchrun job stops


@pytest.mark.skipif(not torch.distributed.is_available() or not hasattr(signal, "SIGSTOP"),
                    reason="needs torch.distributed and POSIX signals")
def test_a_rank_that_stops_answering_is_named_after_the_timeout(tmp_path):
    from test_distributed import SILENCE_S, stop_a_rank

    message = stop_a_rank(tmp_path)  # two gloo processes; rank 1 pauses itself (SIGSTOP) after two batches
    assert message.startswith("StoppedRankError: "), message
    assert_one_sentence(message.split(": ", 1)[1], rf"^Process rank 1 of 2 stopped answering, and rank 0 gave up after "
                                                   rf"waiting {SILENCE_S} s: find out what stopped it .*--resume; "
                                                   r"LMCOURSE_DIST_TIMEOUT sets how long the others wait")


# ------------------------------------------------------------ the run folder's own files are never followed


def test_a_lock_that_is_a_link_is_refused_and_never_followed(home, capsys, trained):
    """Issue 42, defect 2: `ln -s ~/victim.txt R/.lock` made `train --out R` write the lock's JSON into victim.txt."""
    from lmcourse.training.lock import RunLock

    victim = home / "victim.txt"
    victim.write_text("my notes\n")
    out = home / "run"
    out.mkdir()
    (out / LOCK).symlink_to(victim)
    before = files_under(home)
    code, _, err = cli(capsys, train_argv(trained[0], out))
    assert code == 1
    assert_one_sentence(err, r"run/\.lock is a symbolic link, and a lock file is never followed: remove the link")
    assert victim.read_text() == "my notes\n" and files_under(home) == before and (out / LOCK).is_symlink()
    with pytest.raises(RunDirError, match="is a symbolic link"):
        RunLock(out).acquire()
    (out / LOCK).unlink()
    (out / LOCK).symlink_to(home / "gone.txt")  # a dangling link would be created through, too
    with pytest.raises(RunDirError, match="is a symbolic link"):
        RunLock(out).acquire()
    assert not (home / "gone.txt").exists()


def test_an_overwritten_that_is_a_link_moves_nothing(home, capsys, trained):
    """Issue 42, defect 3: `ln -s ~/papers R/.overwritten` moved every file of ~/papers into R."""
    from lmcourse.cli import reproduce

    papers = home / "papers"
    papers.mkdir()
    for name in ("draft.tex", "best.pt", "notes.md"):
        (papers / name).write_text(f"{name}\n")
    for fresh in (False, True):
        out = home / ("fresh" if fresh else "run")
        if fresh:
            out.mkdir()
        else:
            out = copy_run(trained, home)
        (out / reproduce.ASIDE).symlink_to(papers)
        before = files_under(home)
        code, _, err = cli(capsys, train_argv(trained[0], out, *([] if fresh else ["--overwrite"])))
        assert code == 1
        assert_one_sentence(err, r"\.overwritten is a symbolic link, and a run folder's \.overwritten is its own, never "
                                 r"followed: nothing was moved")
        assert files_under(home) == before and sorted(p.name for p in papers.iterdir()) == ["best.pt", "draft.tex",
                                                                                              "notes.md"]


def test_resume_never_deletes_a_newer_run_to_put_an_older_one_back(home, capsys, trained):
    """Issue 42, defect 4: an `--overwrite --set seed=5` run killed after an epoch, then its last.pt removed: `--resume`
    deleted the newer run's best.pt, history, config and preset to put the older run back."""
    from lmcourse.cli import reproduce

    out = copy_run(trained, home)
    reproduce.Aside(out).move()  # the --overwrite of a process then killed outright
    for name in ("preset.json", "config.json", "history.json", "best.pt", "curves.png"):  # the newer run's epoch
        shutil.copy(out / reproduce.ASIDE / name, out / name)
    meta = json.loads((out / "preset.json").read_text())
    meta["settings"]["seed"] = 5
    (out / "preset.json").write_text(json.dumps(meta))  # last.pt of the newer run: removed
    before = files_under(home)
    code, _, err = cli(capsys, train_argv(trained[0], out, "--set", "seed=5", "--resume"))
    assert code == 1
    assert_one_sentence(err, r"holds a newer run that finished an epoch \(best\.pt, curves\.png, history\.json\) but "
                             r"has no last\.pt to resume from, beside the earlier run an --overwrite set aside in .*"
                             r"nothing was deleted")
    assert files_under(home) == before


def test_resume_names_what_it_found_when_there_is_nothing_to_resume(home, capsys, trained):
    out = copy_run(trained, home)
    (out / "last.pt").unlink()
    code, _, err = cli(capsys, train_argv(trained[0], out, "--resume"))
    assert code == 1
    assert_one_sentence(err, r"There is no run to resume in .*run \(it holds config\.json, history\.json, best\.pt, "
                             r"curves\.png, preset\.json but no last\.pt, so nothing can be resumed\)")
