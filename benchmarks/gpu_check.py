"""`make gpu-check`: the course's GPU path checked in one command, in at most 8 minutes on one GPU.

Two tracks run side by side. The side track runs a few parts at a time, each in its own process:

- ``cuda-tests``: every test marked ``cuda`` (``pytest -m cuda``), TF32 off;
- ``ddp``: two data-parallel ranks on one GPU, NCCL first; when NCCL refuses, gloo over CUDA tensors,
  and NCCL's refusal is reported in the table;
- ``lesson NN``: every lesson executed headless at ``cpu`` scale on CUDA.

The timed track runs, one after another:

- ``epoch awd-lstm-ptb``: one epoch at full size, tokens per second and the first epoch's validation
  perplexity; then ``finetune``: the ASGD finetuning preset from that run (a cut of the text), and
  ``evaluate``: the finetuned run scored with the neural cache over dynamic evaluation;
- ``epoch awd-lstm-wt2`` and ``epoch mos-ptb``: the same measurements;
- ``epoch transformer-ptb``: the course's 24M Transformer on PTB (lesson 10 at ``gpu``), last, so it runs only
  when the budget has time left after the three papers' presets.

Each part is a child process with its own time limit (never past the global deadline); its output
goes to ``<out>/<part>.log``. One table is printed and written to ``<out>/table.md`` (and
``results.json``) even when parts fail or run out of time; the exit status is 1 when any part did
not pass. Without CUDA the check says so in one sentence and exits 0. ``--device cpu`` runs the same
mechanics tiny on the CPU (ci-sized presets on the embedded corpus, lesson 01 at ``ci``), to test
the check itself without a GPU.

    python benchmarks/gpu_check.py --out gpu-check          # on a CUDA machine (make gpu-check)
    python benchmarks/gpu_check.py --device cpu --out /tmp/x  # the dry run
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 470  # the whole check, under the 8 minutes it promises
PRESETS = ("awd-lstm-ptb", "awd-lstm-wt2", "mos-ptb", "transformer-ptb")  # the timed track's order
REFERENCE_EPOCH_S = 65.0  # awd-lstm-lm README: about 65 s per PTB epoch on a Quadro GP100, batch 20
REFUSAL = r"duplicate gpu|ncclInvalidUsage|invalid usage|same (cuda )?device"  # NCCL on two ranks of one GPU
LONGEST_FIRST = ("05", "06", "09", "08", "07", "02b", "02")  # lessons started first: their cpu runs are longest
CUT = ["--set", "train_tokens=100000", "--set", "valid_tokens=5000", "--set", "test_tokens=5000"]


@dataclass
class Part:
    """One line of the table: a child process, its limit, and what it measured."""

    name: str
    argv: list
    limit_s: float
    env: dict = field(default_factory=dict)
    status: str = "not run"  # pass | FAIL | TIMEOUT | not run
    seconds: float = 0.0
    note: str = ""
    measured: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------ running one part

def child_env(extra: dict) -> dict:
    """The environment of a part: this repository first on PYTHONPATH, one-sentence errors, ``extra`` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "4")
    env.setdefault("LMCOURSE_DIST_TIMEOUT", "60")
    env.update(extra)
    return env


def run_part(part: Part, out: Path, deadline: float) -> Part:
    """Run ``part`` in its own process group, at most ``part.limit_s`` seconds and never past ``deadline``."""
    limit = min(part.limit_s, deadline - time.monotonic())
    log = out / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', part.name)}.log"
    if limit < 5:
        part.status, part.note = "not run", "no time left in the check's budget"
        return part
    start = time.monotonic()
    try:
        rc = _spawn(part, log, limit)
    except Exception as error:  # the check itself could not start the part: a row, not a crash
        part.status, part.note = "FAIL", f"could not run: {type(error).__name__}: {error}"[:160]
        return part
    part.seconds = round(time.monotonic() - start, 1)
    text = log.read_text(errors="replace")
    if rc is None:
        part.status, part.note = "TIMEOUT", f"stopped after {limit:.0f} s"
    else:
        part.status = "pass" if rc == 0 else "FAIL"
        if rc != 0:
            part.note = last_error(text) or f"exit status {rc}"
    part.measured.update(measure(text))
    return part


def _spawn(part: Part, log: Path, limit: float) -> Optional[int]:
    """Run the part with its output in ``log``; its exit status, or None when it ran past ``limit``."""
    with open(log, "w") as sink:
        sink.write("$ " + " ".join(map(str, part.argv)) + "\n")
        sink.flush()
        child = subprocess.Popen(part.argv, cwd=REPO, env=child_env(part.env), stdout=sink,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return child.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            _stop(child)
            return None


def _stop(child: subprocess.Popen) -> None:
    """End the part's whole process group (its kernels and ranks too): TERM, then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def last_error(text: str) -> str:
    """The most telling line of a failed part's log: an ``error:`` line, else the last exception or failure."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (r"^error: ", r"Error\b|Exception\b|^FAILED ", r"failed|refused"):
        hits = [line for line in lines if re.search(pattern, line)]
        if hits:
            return hits[-1][:160]
    return lines[-1][:160] if lines else ""


def measure(text: str) -> dict:
    """What a part printed that the table reads: pytest's counts, a train/evaluate JSON line, the tokens."""
    found = {}
    counts = re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?)", text)
    if counts:
        found["tests"] = ", ".join(f"{n} {word}" for n, word in counts if word != "deselected")
    lesson = re.search(r"^executed in ([\d.]+) s$", text, re.M)
    if lesson:
        found["lesson_s"] = float(lesson[1])
    tokens = re.search(r"([\d,]+) training tokens", text)
    if tokens:
        found["train_tokens"] = int(tokens[1].replace(",", ""))
    for line in text.splitlines():
        if line.startswith("{") and line.rstrip().endswith("}"):
            try:
                found.update(json.loads(line))
            except ValueError:
                pass
    return found


# ------------------------------------------------------------------------------------- the plan

def python() -> list:
    return [sys.executable]


def lesson_parts(names: Sequence[str], scale: str, device: str, limit_s: float, threads: int) -> list:
    """One part per lesson: executed headless in a fresh kernel at ``scale`` on ``device``."""
    sys.path.insert(0, str(REPO))
    from lmcourse.authoring.lessons import lessons

    code = ("import sys; from pathlib import Path; from lmcourse.authoring.lessons import execute; "
            "_, s = execute(Path(sys.argv[1]), sys.argv[2]); print(f'executed in {s:.1f} s')")
    first = {lesson: rank for rank, lesson in enumerate(LONGEST_FIRST)}
    chosen = sorted(lessons(names), key=lambda path: first.get(path.name.split("_", 1)[0], len(first)))
    return [Part(f"lesson {path.stem}", python() + ["-c", code, str(path), scale], limit_s,
                 env={"LMCOURSE_DEVICE": device, "OMP_NUM_THREADS": str(threads)})
            for path in chosen]


def cuda_test_files() -> list:
    """The test files that hold a test marked ``cuda`` (only these are collected: a file needing a package this
    machine lacks cannot fail the check's CUDA tests)."""
    return [str(f.relative_to(REPO)) for f in sorted((REPO / "tests").rglob("test_*.py"))
            if "mark.cuda" in f.read_text(encoding="utf-8")]


def tests_part(device: str) -> Part:
    """Every test marked ``cuda`` (skipped, with their reason, on the CPU)."""
    return Part("cuda-tests", python() + ["-m", "pytest", *cuda_test_files(), "-m", "cuda", "-q", "-rs"], 150,
                {"LMCOURSE_DEVICE": device})


def corpus_part(device: str) -> Part:
    """The embedded corpus generated once, before lessons that read it start side by side."""
    code = "from lmcourse.corpora.data import load_corpus; print(load_corpus('embedded'))"
    return Part("embedded corpus", python() + ["-c", code], 120, {"LMCOURSE_DEVICE": device})


def train_parts(device: str, work: Path, tiny: bool, data: Optional[str] = None) -> list:
    """The presets' first epochs at full size, ASGD finetuning, and evaluation with the cache and dyneval.

    PTB's epoch first, then the finetuning and evaluation that start from it, so every code path is walked
    before the two longer epochs (WikiText-2, MoS) spend what is left of the budget; the Transformer's epoch,
    which no published timing backs, comes last."""
    env = {"LMCOURSE_DEVICE": device}
    scale = ["--scale", "ci", "--data", "embedded"] if tiny else ["--scale", "gpu"] + (["--data", data] if data else [])
    train = python() + ["-m", "lmcourse", "train", "--quiet", "--overwrite"]
    cut = [] if tiny else CUT

    def epoch(preset: str) -> Part:
        argv = train + ["--preset", preset, *scale, "--set", "epochs=1", "--out", str(work / preset)]
        return Part(f"epoch {preset}", argv, 60 if tiny else 170, env)

    finetune = work / "awd-lstm-ptb-finetune"
    return [epoch(PRESETS[0]),
            Part("finetune (ASGD)", train + ["--preset", "awd-lstm-ptb-finetune", *scale, "--from",
                                             str(work / PRESETS[0]), "--set", "epochs=2", *cut, "--out", str(finetune)],
                 60 if tiny else 90, env),
            Part("evaluate --cache --dyneval", python() + ["-m", "lmcourse", "evaluate", str(finetune), "--cache",
                                                           "--dyneval"], 60 if tiny else 90, env),
            *(epoch(preset) for preset in PRESETS[1:])]


def ddp_part(backend: str, device: str, work: Path, tiny: bool) -> Part:
    """Two ranks of ``torchrun`` on one device, training the PTB recipe's cpu-sized model for an epoch."""
    data = ["--data", "embedded"] if tiny else []
    argv = python() + ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "lmcourse", "train",
                       "--quiet", "--overwrite", "--preset", "awd-lstm-ptb", "--scale", "ci" if tiny else "cpu", *data,
                       "--set", "epochs=1", "--out", str(work / f"ddp-{backend}")]
    return Part(f"ddp 2 ranks ({backend})", argv, 60 if tiny else 90,
                {"LMCOURSE_DEVICE": device, "LMCOURSE_DIST_BACKEND": backend, "OMP_NUM_THREADS": "2"})


def run_ddp(device: str, work: Path, out: Path, deadline: float, tiny: bool) -> list:
    """NCCL first on a GPU; when it refuses two ranks on one GPU, gloo over the same CUDA tensors."""
    if device == "cpu":
        return [run_part(ddp_part("gloo", device, work, tiny), out, deadline)]
    nccl = run_part(ddp_part("nccl", device, work, tiny), out, deadline)
    if nccl.status == "pass":
        return [nccl]
    log = out / "ddp_2_ranks_nccl_.log"
    # NCCL's refusal of two ranks on one GPU is measured, not a fault of the course
    if log.is_file() and re.search(REFUSAL, log.read_text(errors="replace"), re.I):
        nccl.status, nccl.note = "refused", f"NCCL refused: {nccl.note}"
    return [nccl, run_part(ddp_part("gloo", device, work, tiny), out, deadline)]


# ---------------------------------------------------------------------------------------- table

def describe(part: Part) -> str:
    """The measurement column: tests' counts, or tokens/s, epoch time and validation perplexity."""
    m = part.measured
    bits = []
    if "tests" in m:
        bits.append(m["tests"])
    if m.get("seconds_per_epoch"):
        spe = m["seconds_per_epoch"]
        if m.get("train_tokens"):
            bits.append(f"{m['train_tokens'] / spe:,.0f} tok/s")
        bits.append(f"{spe:.1f} s/epoch")
        if part.name == "epoch awd-lstm-ptb" and m.get("scale") == "gpu":
            bits.append(f"reference code: {REFERENCE_EPOCH_S:.0f} s on a GP100")
    if m.get("valid_ppl") is not None:
        bits.append(f"valid ppl {m['valid_ppl']:.2f}")
    if "base_valid_ppl" in m:
        bits.append(f"alone {m['base_valid_ppl']:.2f}")
    if "lesson_s" in m:
        bits.append(f"kernel ran {m['lesson_s']:.1f} s")
    if "world_size" in m:
        bits.append(f"world {m['world_size']}")
    return "; ".join(bits)


def table(parts: Sequence[Part], header: str) -> str:
    """The check's one table, in Markdown."""
    rows = [header, "", "| part | status | seconds | measured | note |", "|---|---|---:|---|---|"]
    for p in parts:
        note = p.note.replace("|", "/")
        rows.append(f"| {p.name} | {p.status} | {p.seconds:.1f} | {describe(p)} | {note} |")
    return "\n".join(rows) + "\n"


def failed(parts: Sequence[Part]) -> list:
    """Parts that make the check fail: anything but a pass, except NCCL's measured refusal."""
    return [p for p in parts if p.status not in ("pass", "refused")]


# ------------------------------------------------------------------------------------------ main

def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="gpu-check", help="folder for table.md, results.json and each part's log")
    p.add_argument("--device", default="cuda", help="cuda (the check) or cpu (the same mechanics, tiny)")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole check")
    p.add_argument("--lessons", nargs="*", default=None, help="lesson numbers (default: all; 01 with --device cpu)")
    p.add_argument("--parallel", type=int, default=4, help="lessons run at once")
    p.add_argument("--data", default=None, help="train the presets on this corpus instead of their own (e.g. embedded)")
    p.add_argument("--skip", nargs="*", default=[], choices=("tests", "lessons", "train", "ddp"),
                   help="leave out these groups of parts")
    return p.parse_args(argv)


def cuda_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse(argv)
    tiny = args.device == "cpu"
    if not tiny and not cuda_present():
        print("gpu-check: torch sees no CUDA GPU on this machine, so there is nothing to check "
              "(python benchmarks/gpu_check.py --device cpu runs its mechanics on the CPU).")
        return 0
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="lmcourse-gpu-check-"))  # checkpoints: hundreds of MB, kept out of --out
    deadline = time.monotonic() + args.budget
    names = args.lessons if args.lessons is not None else (["01"] if tiny else [])
    lessons = [] if "lessons" in args.skip else lesson_parts(
        names, "ci" if tiny else "cpu", args.device, 240, max(1, (os.cpu_count() or 4) // max(1, args.parallel)))
    tests = [] if "tests" in args.skip else [tests_part(args.device)]
    trainings = [] if "train" in args.skip else train_parts(args.device, work, tiny, args.data)
    start = time.monotonic()
    main = [report(run_part(corpus_part(args.device), out, deadline))] if lessons else []
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:  # the side track: checks, not timings
        side = [pool.submit(lambda p=p: [report(run_part(p, out, deadline))]) for p in tests]
        if "ddp" not in args.skip:
            side.append(pool.submit(lambda: [report(p) for p in run_ddp(args.device, work, out, deadline, tiny)]))
        side += [pool.submit(lambda p=p: [run_part(p, out, deadline)]) for p in lessons]
        main += [report(run_part(p, out, deadline)) for p in trainings]  # the timed track, one at a time
        for future in side:
            main += [p for p in future.result() if p not in lessons]
    corpus = f"; presets on {args.data}, not their own corpora" if args.data and not tiny else ""
    header = (f"gpu-check on {device_name(args.device)}{corpus}: {time.monotonic() - start:.0f} s in all "
              f"(budget {args.budget:.0f} s); the tests, DDP ranks and lessons ran {args.parallel} at a time beside "
              "the timed trainings, so those share the GPU with them")
    text = table(main + lessons, header)
    print(text)
    sys.path.insert(0, str(REPO))
    from lmcourse.checksum import atomic_write  # the package's one atomic write: a table is never left half written

    atomic_write(out / "table.md", text)
    atomic_write(out / "results.json", json.dumps([asdict(p) for p in main + lessons], indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)
    bad = failed(main + lessons)
    if bad:
        print(f"gpu-check: {len(bad)} part(s) did not pass: {', '.join(p.name for p in bad)}; see {out}/*.log.")
    return 1 if bad else 0


def report(part: Part) -> Part:
    """One line as each part of the main track ends, so a long check shows where it is."""
    print(f"gpu-check: {part.name}: {part.status} ({part.seconds:.0f} s)", flush=True)
    return part


def device_name(device: str) -> str:
    if device == "cpu":
        return "the CPU (dry run)"
    import torch

    return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda})"


if __name__ == "__main__":
    sys.exit(main())
