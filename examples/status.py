#!/usr/bin/env python3
"""Read a coolgp node's status (and optionally predictions) with the PyPI `eclipse-zenoh` package.

    pip install eclipse-zenoh            # same 1.x line as the Rust nodes
    python3 examples/status.py --connect tcp/127.0.0.1:7447 --fleet demo --agent 0
    python3 examples/status.py --connect tcp/127.0.0.1:7447 --fleet demo --agent 0 --predict 0,0 1,-1

Key layout (docs/NODE.md): coolgp/<fleet>/<agent>/status answers JSON;
coolgp/<fleet>/<agent>/predict takes {"x": [[...], ...], "columns": [...]} and answers
{"mean": [...], "var_f": [...], "var_y": [...]}.
"""
import argparse
import json
import sys
import time

import zenoh


def query(session, selector, payload=None, timeout=10.0):
    """First reply's payload as a string; retries until `timeout` (routes take a moment)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        kwargs = {"timeout": 1.5}
        if payload is not None:
            kwargs["payload"] = payload
        for reply in session.get(selector, **kwargs):
            if reply.ok is not None:
                return reply.ok.payload.to_string()
            raise RuntimeError(f"{selector}: {reply.err.payload.to_string()}")
        time.sleep(0.1)
    raise TimeoutError(f"no reply from {selector}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connect", action="append", required=True, help="zenoh endpoint (repeatable)")
    ap.add_argument("--fleet", required=True)
    ap.add_argument("--agent", type=int, required=True)
    ap.add_argument("--fused", action="store_true", help="include the fused excess")
    ap.add_argument("--predict", nargs="*", metavar="X1,X2,...", help="input rows to predict at")
    args = ap.parse_args()

    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("connect/endpoints", json.dumps(args.connect))
    conf.insert_json5("listen/endpoints", "[]")
    conf.insert_json5("scouting/multicast/enabled", "false")
    with zenoh.open(conf) as session:
        key = f"coolgp/{args.fleet}/{args.agent}/status"
        status = json.loads(query(session, key + ("?fused=true" if args.fused else "")))
        keys = ["blocks", "points", "fleet_points", "round", "neighbors_heard", "rejected", "rmse_holdout"]
        for k in keys:
            print(f"{k:>16}: {status.get(k)}")
        if args.predict:
            rows = [[float(v) for v in r.split(",")] for r in args.predict]
            req = json.dumps({"x": rows, "columns": status["inputs"][: len(rows[0])]})
            pred = json.loads(query(session, f"coolgp/{args.fleet}/{args.agent}/predict", req))
            print("mean,var_f,var_y")
            for m, f, y in zip(pred["mean"], pred["var_f"], pred["var_y"]):
                print(f"{m},{f},{y}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
