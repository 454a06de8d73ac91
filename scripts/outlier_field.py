#!/usr/bin/env python3
"""The outlier field of docs/ROBUST.md §4: scattered gross outliers where no station is at fault.

Ten stations observe f(x1, x2) = sin x1 + 0.5 cos 2x2 + N(0, 0.1²) at inputs uniform on
[-3, 3]², 500 rows each; in the outlier file 5% of every station's rows (25, chosen at
random) report y + N(0, 10²) instead. The test file is 1,000 noise-free rows of f, each
tagged with a station (i mod 10). Rows are written station by station, in arrival order
(the simulator shuffles batches unless --order file). Deterministic in the seed
(random.Random(100 + seed)); standard library only.

    scripts/outlier_field.py --seed 0 --out /tmp/outliers0
    coolgp simulate --data /tmp/outliers0/outliers.csv --target y --inputs x1,x2 \\
        --agent-by station --test /tmp/outliers0/test.csv --projection fleet \\
        --no-baselines --seed 0 --likelihood robust --out results/r0

writes outliers.csv (with the outliers), clean.csv (the same rows without them) and test.csv.
"""

import argparse
import math
import os
import random

STATIONS = 10
ROWS = 500
TEST_ROWS = 1000


def f(x1, x2):
    return math.sin(x1) + 0.5 * math.cos(2.0 * x2)


def write(path, rows):
    with open(path, "w", encoding="utf-8") as out:
        out.write("station,x1,x2,y\n")
        for s, x1, x2, y in rows:
            out.write(f"{s},{x1:.10g},{x2:.10g},{y:.10g}\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fraction", type=float, default=0.05, help="outlier rows per station")
    p.add_argument("--scale", type=float, default=10.0, help="outlier noise sd")
    p.add_argument("--out", required=True, help="directory to write the three CSVs into")
    a = p.parse_args()
    rng = random.Random(100 + a.seed)
    clean, dirty = [], []
    bad_per_station = round(a.fraction * ROWS)
    for s in range(STATIONS):
        rows = []
        for _ in range(ROWS):
            x1, x2 = rng.uniform(-3.0, 3.0), rng.uniform(-3.0, 3.0)
            rows.append((s, x1, x2, f(x1, x2) + rng.gauss(0.0, 0.1)))
        bad = set(rng.sample(range(ROWS), bad_per_station))
        clean.extend(rows)
        dirty.extend(
            (s, x1, x2, y + rng.gauss(0.0, a.scale)) if i in bad else (s, x1, x2, y)
            for i, (s, x1, x2, y) in enumerate(rows)
        )
    test = []
    for i in range(TEST_ROWS):
        x1, x2 = rng.uniform(-3.0, 3.0), rng.uniform(-3.0, 3.0)
        test.append((i % STATIONS, x1, x2, f(x1, x2)))
    os.makedirs(a.out, exist_ok=True)
    write(os.path.join(a.out, "outliers.csv"), dirty)
    write(os.path.join(a.out, "clean.csv"), clean)
    write(os.path.join(a.out, "test.csv"), test)


if __name__ == "__main__":
    main()
