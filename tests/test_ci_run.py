"""CI's entry point keeps its CPU-variety pass: ``.ci/run`` executed with every command it calls faked (``make``,
``python``, ``id``), each fake writing down its arguments and the limits it saw; and ``.ci/cpu_limits.py``, which
reads the limits back from torch, tried on its reports."""
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMITS = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
SEEN = ("OMP_NUM_THREADS", *LIMITS, "LMCOURSE_SCALE")  # what each fake command writes down besides its arguments
FAKE = """#!/usr/bin/env bash
printf '%s' "$(basename "$0") $*" >> "$CI_LOG"
for name in {names}; do printf '\\t%s=%s' "$name" "${{!name-}}" >> "$CI_LOG"; done
printf '\\n' >> "$CI_LOG"
{tail}
"""


def _fake(path: Path, tail: str = "exit 0") -> None:
    path.write_text(FAKE.format(names=" ".join(SEEN), tail=tail))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run_ci(tmp_path, monkeypatch) -> list:
    """Run a copy of .ci/run with faked commands: [(command line, {variable: value})] in the order called."""
    root = tmp_path / "clone"
    (root / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", root / ".ci" / "run")
    (root / ".venv" / "bin").mkdir(parents=True)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for name in ("make", "python3", "apt-get"):
        _fake(bin_ / name)
    _fake(bin_ / "id", tail="echo 1000")  # not root: nothing is installed
    _fake(root / ".venv" / "bin" / "python", tail="echo /usr/bin/chromium")  # find_chromium finds one
    log = tmp_path / "log"
    for name in SEEN:
        monkeypatch.delenv(name, raising=False)
    env = dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}", CI_LOG=str(log), CI="true")
    done = subprocess.run(["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = []
    for line in log.read_text().splitlines():
        command, *values = line.split("\t")
        calls.append((command, dict(v.split("=", 1) for v in values)))
    return calls


def _index(calls, predicate) -> int:
    found = [i for i, (command, _) in enumerate(calls) if predicate(command)]
    assert len(found) == 1, (found, calls)
    return found[0]


def test_ci_runs_the_unit_tests_and_lesson_02b_limited_to_avx2(tmp_path, monkeypatch):
    calls = _run_ci(tmp_path, monkeypatch)
    first = _index(calls, lambda c: c == "make test")
    check = _index(calls, lambda c: c.startswith("python") and ".ci/cpu_limits.py" in c)
    unit = _index(calls, lambda c: c == "make unit")
    lesson = _index(calls, lambda c: c.startswith("python -m pytest") and "02b_lstm_language_models.ipynb" in c)
    assert first < check < unit and check < lesson  # the limits are read back before anything runs under them
    for i in (check, unit, lesson):
        seen = calls[i][1]
        assert {k: seen[k] for k in LIMITS} == LIMITS, calls[i]
    assert calls[unit][1]["OMP_NUM_THREADS"] == "1"  # still the one-thread pass
    assert calls[lesson][1]["LMCOURSE_SCALE"] == "ci" and "--nbval-lax" in calls[lesson][0]
    assert not any(calls[first][1][k] for k in LIMITS)  # the first pass runs on the machine's own kernels


def test_the_fake_run_would_see_a_lost_setting(tmp_path, monkeypatch):
    """The test above can fail: a .ci/run whose unit pass lost a limit is caught."""
    text = (REPO / ".ci" / "run").read_text()
    assert "MKL_ENABLE_INSTRUCTIONS=AVX2" in text
    broken = tmp_path / "repo"
    (broken / ".ci").mkdir(parents=True)
    (broken / ".ci" / "run").write_text(text.replace(" MKL_ENABLE_INSTRUCTIONS=AVX2", ""))
    monkeypatch.setattr(sys.modules[__name__], "REPO", broken)
    with pytest.raises(AssertionError):
        test_ci_runs_the_unit_tests_and_lesson_02b_limited_to_avx2(tmp_path / "run", monkeypatch)


def _limits_module():
    spec = importlib.util.spec_from_file_location("cpu_limits", REPO / ".ci" / "cpu_limits.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


AVX512_REPORT = """aten: AVX512
onednn bf16: True
mkl: True
onednn_verbose,v1,info,cpu,isa:Intel AVX-512 with Intel DL Boost and bfloat16 support
MKL_VERBOSE oneMKL 2024.0 Product build 20231011 for Intel(R) 64 architecture Intel(R) Advanced Vector Extensions 512 \
(Intel(R) AVX-512) with support of Intel(R) Deep Learning Boost (Intel(R) DL Boost), EVEX-encoded AES and Carry-Less \
Multiplication Quadword instructions, Lnx 2.60GHz lp64 gnu_thread
"""
AVX2_REPORT = """aten: AVX2
onednn bf16: False
mkl: True
onednn_verbose,v1,info,cpu,isa:Intel AVX2
MKL_VERBOSE oneMKL 2024.0 Product build 20231011 for Intel(R) 64 architecture Intel(R) Advanced Vector Extensions 2 \
(Intel(R) AVX2) enabled processors, Lnx 2.60GHz lp64 gnu_thread
"""


@pytest.mark.parametrize("report, culprits", [
    (AVX2_REPORT, []),
    (AVX512_REPORT, ["ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"]),
    (AVX2_REPORT.replace("isa:Intel AVX2", "isa:Intel AVX-512"), ["ONEDNN_MAX_CPU_ISA"]),
    (AVX2_REPORT.replace("aten: AVX2", "aten: AVX512"), ["ATEN_CPU_CAPABILITY"]),
    ("\n".join(line for line in AVX2_REPORT.splitlines() if "MKL_VERBOSE" not in line), ["MKL_ENABLE_INSTRUCTIONS"]),
])
def test_the_limit_check_reads_each_library_s_report(report, culprits):
    cl = _limits_module()
    found = cl.problems(cl.read(report), dict(LIMITS))
    assert [sentence.split("=")[0] for sentence in found] == culprits, found
    missing = cl.problems(cl.read(AVX2_REPORT), {})
    assert len(missing) == 3 and all("set it for this pass" in s for s in missing)


def test_the_limits_take_effect_on_this_machine():
    """Under the three settings torch itself reports AVX2 kernels, here (the check CI runs, for real)."""
    done = subprocess.run([sys.executable, str(REPO / ".ci" / "cpu_limits.py")], env=dict(os.environ, **LIMITS),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ATen AVX2" in done.stdout
