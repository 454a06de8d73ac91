#!/usr/bin/env python3
"""The Python side of the overhead benchmark (BENCHMARKS.md §11): the same calls as the Rust
example `bench_calls` makes, on the same data, through `coolgp.Agent`.

    python crates/coolgp-py/bench/bench_calls.py [REPEATS]

Setup: m = 100, d = d' = 8, frozen mode, learning on; 5 blocks of 1,000 rows first. Timed:
Agent.predict of 10,000 points (fused) and Agent.observe of a 1,000-row block, from numpy
float64 arrays; min and median over REPEATS (default 15) calls after one warm-up call.
"""
import sys
import time

import numpy as np

import coolgp


def data(n, d, s):
    """x[i][j] = 2 sin(0.37 (i·d + j) + s), y = sin(x_0) + x_{d−1}/2 (as the Rust example)."""
    x = 2.0 * np.sin(0.37 * np.arange(n * d, dtype=float).reshape(n, d) + s)
    return x, np.sin(x[:, 0]) + 0.5 * x[:, d - 1]


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    m, d = 100, 8
    agent = coolgp.Agent(1, coolgp.Vocabulary(m, d, 0), input_dim=d)
    for b in range(5):
        agent.observe(*data(1000, d, float(b)))
    xt, _ = data(10_000, d, 0.5)
    pred = []
    for r in range(repeats + 1):
        t = time.perf_counter()
        mean, _, _ = agent.predict(xt)
        s = time.perf_counter() - t
        assert mean.shape == (10_000,)
        if r > 0:
            pred.append(s)
    obs = []
    for r in range(repeats + 1):
        x, y = data(1000, d, 10.0 + r)
        t = time.perf_counter()
        agent.observe(x, y)
        s = time.perf_counter() - t
        if r > 0:
            obs.append(s)
    for name, t in (("predict 10000 x 8", pred), ("observe  1000 x 8", obs)):
        t = sorted(t)
        print(f"python {name}: min {t[0] * 1e3:.2f} ms, median {t[len(t) // 2] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
