#!/usr/bin/env python3
"""Clairvoyant lower bound on the GPU-seconds a P/D policy needs on the bursty replay.

Cuts scenarios/dopd/bursty_static.json's trace into windows of the planners' adjustment interval
(20 s at time scale 0.4), runs every window alone with every static disaggregated layout that
fits the 8-GPU budget (P prefill instances of TP 1, D decode instances of TP 2), and picks one
layout per window so that the whole replay meets the SLO for at least a target share of its
requests at the fewest GPU-seconds (a multiple-choice knapsack over the windows' misses, solved
exactly by dynamic programming).

Every window starts empty (nothing carried over from the one before), changes layout instantly
(no start-up) and is charged its length only, so the bound is optimistic: no policy that
resizes at the same interval can meet the target with fewer GPU-seconds under servesim's cost
model. Its gap to an online policy is what forecasting and start-up delays cost.

Usage: bench/dopd_oracle.py [--bin build/app/servesim] [--jobs 2] [--target 0.97 ...]
"""
import argparse
import itertools
import json
import math
import subprocess
from concurrent.futures import ThreadPoolExecutor

SCENARIO = "scenarios/dopd/bursty_static.json"
TIME_SCALE = 0.4
WINDOW_S = 20.0          # simulated seconds per window: the planners' adjustment interval
TRACE_S = 3600.0         # the trace's hour, in its own time
GPU_BUDGET = 8


def run_window(binary, k, layout):
    prefill, decode = layout
    start = k * WINDOW_S / TIME_SCALE
    cmd = [binary, "run", SCENARIO, "--no-db", "--json",
           "--set", f"workload.time_scale={TIME_SCALE}",
           "--set", f'workload.window={{"start":"{start}s","duration":"{WINDOW_S / TIME_SCALE}s"}}',
           "--set", f"policy.num_prefill={prefill}", "--set", f"policy.num_decode={decode}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None  # a window past the end of the trace has no requests
    summary = json.loads(out.stdout)["summary"]
    requests = int(summary["requests"])
    misses = round(requests * (1.0 - summary["slo_attainment"]))
    return requests, misses


def cheapest(windows, target):
    """Fewest GPU-seconds over one layout per window with misses <= (1 - target) x requests."""
    total = sum(next(iter(w.values()))[0] for w in windows)
    budget = math.floor((1.0 - target) * total)
    best = [0.0] + [math.inf] * budget  # best[m]: fewest GPU-s with m misses so far
    for w in windows:
        nxt = [math.inf] * (budget + 1)
        for m, cost in enumerate(best):
            if cost == math.inf:
                continue
            for (prefill, decode), (_, misses) in w.items():
                mm = m + misses
                gpu_s = (prefill + 2 * decode) * WINDOW_S
                if mm <= budget and cost + gpu_s < nxt[mm]:
                    nxt[mm] = cost + gpu_s
        best = nxt
    return total, budget, min(best)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/app/servesim")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--target", type=float, nargs="+", default=[0.97, 0.9837, 0.6832])
    args = ap.parse_args()
    layouts = [(p, d) for p in range(1, GPU_BUDGET) for d in range(1, GPU_BUDGET)
               if p + 2 * d <= GPU_BUDGET]
    n_windows = math.ceil(TRACE_S * TIME_SCALE / WINDOW_S)
    jobs = list(itertools.product(range(n_windows), layouts))
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda j: run_window(args.bin, *j), jobs))
    windows = {}
    for (k, layout), r in zip(jobs, results):
        if r is not None:
            windows.setdefault(k, {})[layout] = r
    ordered = [windows[k] for k in sorted(windows)]
    span = len(ordered) * WINDOW_S
    print(f"{len(ordered)} windows of {WINDOW_S:.0f} s, {len(layouts)} layouts each "
          f"(P x TP1 prefill + D x TP2 decode <= {GPU_BUDGET} GPUs)")
    for target in args.target:
        total, budget, gpu_s = cheapest(ordered, target)
        print(f"attainment >= {target:.2%}: {gpu_s:,.0f} GPU-s at the least "
              f"(mean {gpu_s / span:.2f} GPUs; {total} requests, at most {budget} missed)")


if __name__ == "__main__":
    main()
