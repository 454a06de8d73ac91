#!/usr/bin/env python3
"""A Python agent that joins a running `coolgp node` fleet.

The model is `coolgp.Agent` (pip install ./crates/coolgp-py); the transport is the PyPI
`eclipse-zenoh` package (same 1.x line as the Rust nodes), with the node's key layout
(docs/NODE.md):

    coolgp/<fleet>/<from>/msg/<to>     model messages: exactly the bytes of Agent.tick()
    coolgp/<fleet>/<agent>/alive       liveliness token (membership)

Each round (--round-ms): absorb one block of --batch rows of --data (a CSV with a header;
inputs = every column but --target, or --inputs), drain received messages into the agent
(checking that the key names the header's sender, as the node does), tick, and publish one
message per neighbour. The vocabulary must be the fleet's: --inducing/--latent-dim/--vocab-seed
as given to the nodes, or --vocab FILE.

    coolgp node --id 1 --fleet lab --neighbors 2 --data a.csv --listen tcp/127.0.0.1:7447
    python3 examples/python_agent.py --id 2 --fleet lab --neighbors 1 --data b.csv \\
        --connect tcp/127.0.0.1:7447

It runs until interrupted, or for --rounds rounds, or (--until-points P) until its fused model
represents P points and --linger more rounds have passed. On exit it prints one JSON line:
points, fleet_points, counters, and the fused q(u) in K-form (T1 = K + D1, T2).
"""
import argparse
import json
import signal
import sys
import time

import numpy as np
import zenoh

import coolgp


def read_csv(path, target, inputs):
    """(X, y, input names) from a CSV with a header."""
    with open(path) as f:
        names = f.readline().strip().split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if target not in names:
        raise SystemExit(f"{path}: no column '{target}' (columns: {names})")
    inputs = inputs or [n for n in names if n != target]
    missing = [n for n in inputs if n not in names]
    if missing:
        raise SystemExit(f"{path}: no column(s) {missing}")
    cols = [names.index(n) for n in inputs]
    return data[:, cols], data[:, names.index(target)], inputs


def zenoh_session(connect, listen):
    """A zenoh peer with explicit endpoints and no multicast scouting (as the node)."""
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("connect/endpoints", json.dumps(connect))
    conf.insert_json5("listen/endpoints", json.dumps(listen))
    conf.insert_json5("scouting/multicast/enabled", "false")
    return zenoh.open(conf)


def message_sender(key, fleet):
    """The sender id a message key names (coolgp/<fleet>/<from>/msg/<to>), or None."""
    parts = str(key).split("/")
    if len(parts) != 5 or parts[0] != "coolgp" or parts[1] != fleet or parts[3] != "msg":
        return None
    try:
        return int(parts[2])
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", type=int, required=True)
    ap.add_argument("--fleet", required=True)
    ap.add_argument("--neighbors", required=True, help="comma-separated agent ids")
    ap.add_argument("--data", required=True, help="CSV with a header")
    ap.add_argument("--target", default="y")
    ap.add_argument("--inputs", help="comma-separated input columns (default: all but the target)")
    ap.add_argument("--inducing", type=int, default=50, help="as the nodes' --inducing")
    ap.add_argument("--latent-dim", type=int, help="as the nodes' --latent-dim (default: inputs)")
    ap.add_argument("--vocab-seed", type=int, default=0, help="as the nodes' --vocab-seed")
    ap.add_argument("--vocab", help="a vocabulary file (the nodes' --vocab)")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--round-ms", type=int, default=200)
    ap.add_argument("--connect", action="append", default=[], help="zenoh endpoint (repeatable)")
    ap.add_argument("--listen", action="append", default=[], help="zenoh endpoint (repeatable)")
    ap.add_argument("--rounds", type=int, help="stop after this many rounds")
    ap.add_argument("--until-points", type=float, help="stop once the fused model holds this many points")
    ap.add_argument("--linger", type=int, default=5, help="rounds to keep sending after --until-points")
    ap.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    args = ap.parse_args()

    x, y, inputs = read_csv(args.data, args.target, args.inputs.split(",") if args.inputs else None)
    d = x.shape[1]
    if args.vocab:
        vocab = coolgp.Vocabulary.load(args.vocab)
    else:
        vocab = coolgp.Vocabulary(args.inducing, args.latent_dim or d, args.vocab_seed)
    agent = coolgp.Agent(args.id, vocab, input_dim=d)
    agent.neighbors = [int(n) for n in args.neighbors.split(",") if n]
    # Start the rounds from the clock, as the node does: peers that heard an earlier
    # incarnation of this agent would reject round numbers they have already seen.
    agent.round = int(time.time() * 1000) // max(args.round_ms, 1)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    counters = {"accepted": 0, "sent": 0, "rejected": {}}
    rounds = linger = 0
    next_row = 0
    started = time.time()
    with zenoh_session(args.connect, args.listen) as session:
        prefix = f"coolgp/{args.fleet}"
        inbox = session.declare_subscriber(f"{prefix}/*/msg/{args.id}")
        publishers = {
            j: session.declare_publisher(
                f"{prefix}/{args.id}/msg/{j}", congestion_control=zenoh.CongestionControl.BLOCK
            )
            for j in agent.neighbors
        }
        token = session.liveliness().declare_token(f"{prefix}/{args.id}/alive")
        while not stop:
            t0 = time.time()
            if next_row < len(y):
                agent.observe(x[next_row : next_row + args.batch], y[next_row : next_row + args.batch])
                next_row += args.batch
            while (sample := inbox.try_recv()) is not None:
                payload = sample.payload.to_bytes()
                try:
                    if message_sender(sample.key_expr, args.fleet) != coolgp.message_info(payload)["sender"]:
                        raise coolgp.RejectedMessage("key_mismatch", "the key does not name the sender")
                    agent.receive(payload)
                    counters["accepted"] += 1
                except coolgp.RejectedMessage as e:
                    reason = e.args[0]
                    counters["rejected"][reason] = counters["rejected"].get(reason, 0) + 1
            for receiver, payload in agent.tick():
                if receiver in publishers:
                    publishers[receiver].put(payload)
                    counters["sent"] += 1
            rounds += 1
            done_data = next_row >= len(y)
            if args.until_points is not None and done_data and agent.fleet_points >= args.until_points:
                linger += 1
            if (args.rounds is not None and rounds >= args.rounds) or linger > args.linger:
                break
            if time.time() - started > args.timeout:
                print(f"timeout after {rounds} rounds (fleet_points {agent.fleet_points})", file=sys.stderr)
                break
            time.sleep(max(0.0, args.round_ms / 1000 - (time.time() - t0)))
        token.undeclare()
    t1, t2 = agent.natural_params(fused=True)
    print(json.dumps({
        "id": agent.id,
        "inputs": inputs,
        "points": agent.points,
        "fleet_points": agent.fleet_points,
        "rounds": rounds,
        "fingerprint": vocab.fingerprint,
        **counters,
        "fused_t1": t1.tolist(),
        "fused_t2": t2.tolist(),
    }))
    reached = args.until_points is None or agent.fleet_points >= args.until_points
    return 0 if reached else 1


if __name__ == "__main__":
    sys.exit(main())
