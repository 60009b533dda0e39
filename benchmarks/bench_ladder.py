"""Lesson 09's ladder measured rung by rung over several seeds: the regime in which each idea pays.

Every neural rung trains on the ladder's corpus variant (:func:`lmcourse.course.runs.lesson09.ladder_params`)
with the settings :func:`lmcourse.course.runs.lesson09.rung_settings` gives, one torch thread per run and
``--jobs`` runs at a time. The wrappers (cache, dynamic evaluation, both) are tuned on each seed's own
validation text. Prints, per rung: validation and test perplexity (mean ± sd over seeds), the change
from the rung before, and whether it is beyond the two rungs' sd summed; for the AWD rung, the epoch
at which NT-ASGD started averaging.

    python benchmarks/bench_ladder.py [--seeds 0 1 2] [--jobs 2] [--set key=value ...] [--store] [--no-wrappers]

``--set`` changes one field of the corpus variant (``n_names=600``) or of the shared settings
(``d=48``, ``hidden_size=128``, ``epochs=30``) for this measurement only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def one_seed(args):
    seed, changes, store, wrap = args
    import torch
    torch.set_num_threads(1)
    from lmcourse.course.runs import lesson09 as ladder

    t0 = time.perf_counter()
    out = ladder.run_ladder(seed, changes=changes, progress=False, store=store, wrap=wrap)
    out["seconds"] = time.perf_counter() - t0
    return seed, out


def parse_changes(pairs):
    changes = {}
    for pair in pairs or []:
        key, _, value = pair.partition("=")
        changes[key] = json.loads(value)
    return changes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--set", nargs="*", default=[])
    ap.add_argument("--store", action="store_true",
                    help="keep the trained rungs in the user's cache, where lesson 09 (and make runs) finds them")
    ap.add_argument("--no-wrappers", action="store_true", help="train and score the trained rungs only")
    args = ap.parse_args(argv)
    changes = parse_changes(args.set)
    print("changes:", changes or "none", flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(pool.map(one_seed, [(s, changes, args.store, not args.no_wrappers) for s in args.seeds]))
    from lmcourse.course.runs import lesson09 as ladder
    rungs = list(results[args.seeds[0]]["ladder"])
    print(f"{'rung':<22} {'valid':>14} {'test':>16} {'change':>8}  beyond spread")
    previous = None
    for rung in rungs:
        v = [results[s]["ladder"][rung]["valid"] for s in args.seeds]
        t = [results[s]["ladder"][rung]["test"] for s in args.seeds]
        mv, mt = statistics.mean(v), statistics.mean(t)
        sd = statistics.stdev(t) if len(t) > 1 else 0.0
        line = f"{rung:<22} {mv:8.2f} ± {statistics.stdev(v) if len(v) > 1 else 0:4.2f} {mt:9.2f} ± {sd:4.2f}"
        if previous:
            pm, psd = previous
            line += f" {100 * (mt / pm - 1):+7.1f}%  {'yes' if pm - mt > sd + psd else 'no'}"
        print(line)
        previous = (mt, sd)
    for s in args.seeds:
        r = results[s]
        print(f"seed {s}: NT-ASGD from epoch {r['switch']}, wrappers {r['notes']}, {r['seconds']:.0f} s")
    print("oracle floor:", results[args.seeds[0]]["floor"])
    print(json.dumps({s: {k: v["test"] for k, v in r["ladder"].items()} for s, r in results.items()}))
    return results


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
