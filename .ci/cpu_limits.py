"""CI's CPU-variety pass runs with torch limited to AVX2; this checks, by asking torch, that the limits took effect.

    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 python .ci/cpu_limits.py

Each limit is read back from the library it limits, in a fresh interpreter: ATen's kernels from
``torch.backends.cpu.get_cpu_capability()``; oneDNN's from its own report (its verbose line ``isa:``, and
``torch.ops.mkldnn._is_mkldnn_bf16_supported()``, false below AVX-512); MKL's matrix products from its
verbose header (the instruction set it dispatches to; on an AMD processor MKL names none, which is not
AVX-512 either). On an AVX2-only machine every limit holds trivially; on an AVX-512 one, a limit that a
renamed variable or a new torch ignores is caught here. Prints one line per library; exits 1 with one
sentence per limit that did not take effect.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

LIMITS = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
WIDER = re.compile(r"AVX-?512|AMX", re.IGNORECASE)  # what an AVX2 limit must not leave in use

PROBE = """
import torch
print("aten:", torch.backends.cpu.get_cpu_capability(), flush=True)
print("onednn bf16:", bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()), flush=True)
print("mkl:", torch.backends.mkl.is_available(), flush=True)
torch.nn.LSTM(4, 6)(torch.randn(3, 2, 4))            # a oneDNN primitive: oneDNN prints its isa
torch.randn(64, 64) @ torch.randn(64, 64)            # a matrix product: MKL prints its header
"""


def probe(env: dict) -> str:
    """What torch reports under ``env``, with oneDNN's and MKL's verbose lines (stdout and stderr together)."""
    env = dict(env, ONEDNN_VERBOSE="1", MKL_VERBOSE="1", OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise SystemExit(f"cpu limits: the probe failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout + done.stderr


def read(report: str) -> dict:
    """The instruction sets in ``report``: ``aten``, ``onednn`` (oneDNN's isa line), ``onednn_bf16``, ``mkl``
    (MKL's header, or None when MKL printed none), ``has_mkl`` (torch built with MKL)."""
    def find(pattern):
        m = re.search(pattern, report, re.MULTILINE)
        return m.group(1).strip() if m else None

    return {"aten": find(r"^aten: (.*)$"), "onednn": find(r"onednn_verbose,.*?info,cpu,isa:(.*)$"),
            "onednn_bf16": find(r"^onednn bf16: (.*)$") == "True", "has_mkl": find(r"^mkl: (.*)$") == "True",
            "mkl": find(r"MKL_VERBOSE (?:oneMKL|Intel\(R\) MKL).* for (.*?)(?:, Lnx|, Win|$)")}


def problems(found: dict, env: dict) -> list[str]:
    """One sentence per limit that is not set in ``env`` or that torch reports not in effect."""
    out = [f"{name} is {env.get(name)!r}, not {value!r}: set it for this pass." for name, value in LIMITS.items()
           if env.get(name) != value]
    if not found["aten"] or found["aten"].upper().startswith("AVX512"):
        out.append(f"ATEN_CPU_CAPABILITY=avx2 did not take effect: torch reports ATen's kernels as {found['aten']!r}.")
    if found["onednn"] is None or WIDER.search(found["onednn"]):
        out.append(f"ONEDNN_MAX_CPU_ISA=AVX2 did not take effect: oneDNN reports its instruction set as "
                   f"{found['onednn']!r}.")
    if found["onednn_bf16"]:
        out.append("ONEDNN_MAX_CPU_ISA=AVX2 did not take effect: torch reports oneDNN's bfloat16 kernels as usable, "
                   "which needs AVX-512.")
    if found["has_mkl"] and (found["mkl"] is None or WIDER.search(found["mkl"])):
        out.append(f"MKL_ENABLE_INSTRUCTIONS=AVX2 did not take effect: MKL reports {found['mkl']!r} "
                   "(none: it printed no header).")
    return out


def main() -> int:
    found = read(probe(dict(os.environ)))
    print(f"cpu limits: ATen {found['aten']}; oneDNN {found['onednn']}, bfloat16 "
          f"{'usable' if found['onednn_bf16'] else 'not usable'}; MKL "
          + (found["mkl"] or "(no header)" if found["has_mkl"] else "not built in"))
    bad = problems(found, dict(os.environ))
    for sentence in bad:
        print(f"cpu limits: FAILED: {sentence}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
