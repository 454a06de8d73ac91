"""The faulty-station field of issue 29 as CSV files (docs/MEMBERS.md §4, "Over batch sizes").

Ten stations, 500 rows each of f = sin x1 + 0.5 cos 2x2 + N(0, 0.1^2), x uniform on [-3, 3]^2;
station 9 faulty (offset, noise, stuck, scaled), or 8 and 9 (offset+scaled); test.csv: 1,000
noise-free rows. Writes DIR/s{0,1}/{clean,offset,...}.csv (DIR: the first argument, default
/tmp/faults-csv). Run each with
  coolgp simulate --data DIR/sS/CASE.csv --test DIR/sS/test.csv --target y --agent-by station \
    --projection fleet --inducing 30 --batch B --seed S --no-baselines --no-central --out OUT
"""
import os
import sys

import numpy as np

ROOT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/faults-csv"

def f(x1, x2): return np.sin(x1) + 0.5*np.cos(2*x2)
for seed in (0, 1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(10, 500, 2))
    Y = f(X[..., 0], X[..., 1]) + 0.1*rng.standard_normal((10, 500))
    noise = 10*rng.standard_normal(500)
    T = rng.uniform(-3, 3, size=(1000, 2))
    d = f"{ROOT}/s{seed}"; os.makedirs(d, exist_ok=True)
    with open(f"{d}/test.csv", "w") as fh:
        fh.write("x1,x2,y\n")
        for t in T: fh.write(f"{t[0]:.6f},{t[1]:.6f},{f(t[0], t[1]):.6f}\n")
    cases = {"clean": {}, "offset": {9: lambda y: y+5}, "noise": {9: lambda y: noise},
             "stuck": {9: lambda y: 3+0*y}, "scaled": {9: lambda y: 10*y},
             "offset+scaled": {8: lambda y: y+5, 9: lambda y: 10*y}}
    for name, faults in cases.items():
        with open(f"{d}/{name}.csv", "w") as fh:
            fh.write("x1,x2,station,y\n")
            for s in range(10):
                y = faults[s](Y[s]) if s in faults else Y[s]
                for i in range(500):
                    fh.write(f"{X[s,i,0]:.6f},{X[s,i,1]:.6f},{s},{y[i]:.6f}\n")
