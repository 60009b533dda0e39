"""Run every benchmark in turn, each in its own process, and print their tables.

    python benchmarks/run_all.py            # all of them
    python benchmarks/run_all.py ngram lstm # a selection

Timings need a quiet machine: close other jobs first. Record the figures, with the machine, in
benchmarks/README.md.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ["ngram", "lstm", "weightdrop", "trainer", "dyneval", "dyneval_memory", "cache", "mos", "memory",
           "rank_regime", "ladder"]


def main(argv: list[str]) -> int:
    chosen = argv or BENCHES
    unknown = sorted(set(chosen) - set(BENCHES))
    if unknown:
        print(f"Unknown benchmark {', '.join(unknown)}: choose from {', '.join(BENCHES)}.", file=sys.stderr)
        return 2
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    print(f"# {platform.platform()}, {os.cpu_count()} logical CPUs, python {platform.python_version()}")
    failed = []
    for name in chosen:
        print(f"\n## {name}\n", flush=True)
        if subprocess.run([sys.executable, str(HERE / f"bench_{name}.py")], env=env).returncode:
            failed.append(name)
    if failed:
        print(f"\nFailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
