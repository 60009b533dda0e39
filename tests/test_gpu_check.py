"""The plumbing of ``make gpu-check`` (benchmarks/gpu_check.py), tested on the CPU: a part that runs past its
limit is stopped and reported, a failing part names its error, the table is written whatever happens, and
without CUDA the check says so and exits 0."""
import importlib.util
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gc():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_a_part_past_its_limit_is_stopped_and_reported(gc, tmp_path):
    part = gc.Part("sleeper", [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"], 6)
    start = time.monotonic()
    gc.run_part(part, tmp_path, deadline=time.monotonic() + 100)
    assert part.status == "TIMEOUT" and "stopped after 6 s" in part.note
    assert time.monotonic() - start < 30
    assert "started" in (tmp_path / "sleeper.log").read_text()


def test_a_failing_part_names_its_error_and_the_deadline_is_kept(gc, tmp_path):
    code = "import sys; print('epoch 1'); print('error: the corpus is missing: set LMCOURSE_DATA.'); sys.exit(1)"
    part = gc.run_part(gc.Part("broken", [sys.executable, "-c", code], 60), tmp_path, time.monotonic() + 60)
    assert part.status == "FAIL" and part.note == "error: the corpus is missing: set LMCOURSE_DATA."
    late = gc.run_part(gc.Part("late", [sys.executable, "-c", "pass"], 60), tmp_path, time.monotonic() + 1)
    assert late.status == "not run" and "budget" in late.note
    assert gc.failed([part, late, gc.Part("nccl", [], 1, status="refused")]) == [part, late]


def test_what_a_part_printed_becomes_the_tables_measurement(gc):
    text = ("awd-lstm-ptb at scale gpu on ptb: ..., 929,589 training tokens, 1 epochs -> x\n"
            '{"scale": "gpu", "valid_ppl": 281.5, "seconds_per_epoch": 40.0, "world_size": 1}\n')
    part = gc.Part("epoch awd-lstm-ptb", [], 1, status="pass", measured=gc.measure(text))
    row = gc.describe(part)
    assert "23,240 tok/s" in row and "40.0 s/epoch" in row and "valid ppl 281.50" in row and "GP100" in row
    assert gc.measure("3 passed, 2 skipped, 1300 deselected in 4.0s")["tests"] == "3 passed, 2 skipped"
    table = gc.table([part], "header")
    assert table.startswith("header\n") and "| epoch awd-lstm-ptb | pass |" in table


def test_without_cuda_the_check_says_so_and_passes(gc, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gc, "cuda_present", lambda: False)
    assert gc.main(["--out", str(tmp_path / "out")]) == 0
    assert "no CUDA GPU" in capsys.readouterr().out and not (tmp_path / "out").exists()


def test_the_table_is_written_even_with_nothing_to_run(gc, tmp_path, capsys):
    assert gc.main(["--device", "cpu", "--out", str(tmp_path), "--skip", "tests", "lessons", "train", "ddp"]) == 0
    assert "| part | status |" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "results.json").read_text().strip() == "[]"


def test_the_cuda_tests_are_collected_from_the_files_that_hold_them(gc):
    files = gc.cuda_test_files()
    assert "tests/test_optim.py" in files and "tests/test_config.py" not in files
    part = gc.tests_part("cuda")
    assert part.argv[-4:] == ["-m", "cuda", "-q", "-rs"] and part.env == {"LMCOURSE_DEVICE": "cuda"}


def test_a_part_that_cannot_start_is_a_failed_row(gc, tmp_path):
    part = gc.run_part(gc.Part("missing", ["/nonexistent/python"], 60), tmp_path, time.monotonic() + 60)
    assert part.status == "FAIL" and part.note.startswith("could not run: FileNotFoundError")


def test_every_cuda_test_carries_the_marker():
    """A CUDA test skipped by its own ``skipif`` would be left out of ``pytest -m cuda``, so of the GPU check."""
    tests = Path(__file__).resolve().parent
    needle = "skipif(not torch.cuda." + "is_available()"  # split, so this file does not match itself
    loose = [f.name for f in sorted(tests.rglob("test_*.py")) if needle in f.read_text(encoding="utf-8")]
    assert not loose, f"{loose}: mark their CUDA tests @pytest.mark.cuda (tests/conftest.py skips them without a GPU)"
