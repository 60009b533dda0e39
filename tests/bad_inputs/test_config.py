"""lmcourse.config and lmcourse.memory: every LMCOURSE_* setting the README promises to check stops the
command line with status 2 and one sentence; the import itself is never stopped."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcourse import config
from lmcourse.authoring import lessons
from lmcourse.errors import ConfigError

from .helpers import assert_one_sentence, cli

REPO = Path(__file__).resolve().parents[2]
BAD_THRESHOLDS = ["abc", "-1", "1.5", "4MB", " 12 12 "]


@pytest.mark.parametrize("value", BAD_THRESHOLDS)
def test_a_bad_mmap_threshold_stops_the_command_line_with_status_2(home, capsys, monkeypatch, value):
    monkeypatch.setenv("LMCOURSE_MMAP_THRESHOLD", value)
    code, out, err = cli(capsys, ["data"])
    assert code == 2 and out == ""
    assert_one_sentence(err.removeprefix("error: "), r"LMCOURSE_MMAP_THRESHOLD=.* is not a number of bytes >= 0")
    with pytest.raises(ConfigError):
        config.check_environment()
    assert lessons.main(["warm", "1"]) == 2


@pytest.mark.parametrize("value", ["abc", "-7"])
def test_in_a_fresh_process_the_command_line_says_it_once(tmp_path, value):
    env = dict(os.environ, LMCOURSE_MMAP_THRESHOLD=value, LMCOURSE_CACHE=str(tmp_path), PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-m", "lmcourse", "--help"], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    assert_one_sentence(run.stderr.removeprefix("error: "), rf"LMCOURSE_MMAP_THRESHOLD='{value}' is not a number")


def test_the_import_falls_back_with_a_note_and_is_not_stopped(tmp_path):
    env = dict(os.environ, LMCOURSE_MMAP_THRESHOLD="abc", PYTHONPATH=str(REPO))
    run = subprocess.run([sys.executable, "-c", "import lmcourse; print('imported')"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "imported"
    assert run.stderr.count("\n") == 1 and "Using 4194304 for now" in run.stderr


@pytest.mark.parametrize("value", ["0", "4194304", ""])
def test_good_thresholds_pass(monkeypatch, value):
    monkeypatch.setenv("LMCOURSE_MMAP_THRESHOLD", value)
    from lmcourse.memory import threshold_setting
    assert threshold_setting() == (int(value) if value else 4 * 1024 * 1024)


def test_a_read_only_cache_is_refused_by_the_first_check(home, capsys, monkeypatch, tmp_path):
    """Issue 42, unclear: with a read-only folder as the cache a lesson stopped in its corpus cell, not its first.
    The folder's permissions are stood in for by os.access (root may write anywhere), which is what the check reads."""
    cache = tmp_path / "read-only-cache"
    cache.mkdir()
    monkeypatch.setenv("LMCOURSE_CACHE", str(cache))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: False if Path(path) == cache and mode & os.W_OK
                        else real_access(path, mode, *a, **k))
    with pytest.raises(ConfigError) as err:
        config.check_environment()  # what a lesson's first cell and the command line call before anything else
    assert_one_sentence(str(err.value), r"LMCOURSE_CACHE=.*read-only-cache is not a folder this program can write to")
    code, out, err_text = cli(capsys, ["data"])
    assert code == 2 and out == "" and "is not a folder this program can write to" in err_text
    assert list(cache.iterdir()) == []
