"""examples/python_agent.py joins a real `coolgp node` over zenoh on loopback: the node accepts
the Python agent's bytes, the Python agent accepts the node's, and both end with the same fused
q(u) (spec §7: T_g = T0 + E_node + E_python). The node's checkpoint then loads in Python."""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import coolgp
from conftest import REPO, run

pytest.importorskip("zenoh")

EXAMPLE = REPO / "examples" / "python_agent.py"
M, ROWS, BATCH, ROUND_MS = 10, 150, 50, 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_csv(path, x, y):
    with open(path, "w") as f:
        f.write("x1,x2,y\n")
        for (a, b), t in zip(x, y):
            f.write(f"{float(a)!r},{float(b)!r},{float(t)!r}\n")


def status(coolgp_bin, port, fleet, agent):
    out = run([coolgp_bin, "status", "--connect", f"tcp/127.0.0.1:{port}", "--fleet", fleet,
               "--agent", str(agent), "--fused", "--timeout-ms", "5000"], timeout=30)
    return json.loads(out)


def test_python_agent_joins_a_node_fleet(coolgp_bin, tmp_path):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(2 * ROWS, 2))
    ys = np.sin(xs[:, 0]) + 0.5 * xs[:, 1] + 0.1 * rng.normal(size=2 * ROWS)
    write_csv(tmp_path / "a.csv", xs[:ROWS], ys[:ROWS])
    write_csv(tmp_path / "b.csv", xs[ROWS:], ys[ROWS:])
    port, fleet = free_port(), f"py{os.getpid()}"
    node = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--fleet", fleet, "--neighbors", "2", "--inducing", str(M),
         "--data", str(tmp_path / "a.csv"), "--batch", str(BATCH), "--round-ms", str(ROUND_MS),
         "--state", str(tmp_path / "state1"), "--listen", f"tcp/127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node.log", "w"))
    try:
        agent = subprocess.run(
            [sys.executable, str(EXAMPLE), "--id", "2", "--fleet", fleet, "--neighbors", "1",
             "--data", str(tmp_path / "b.csv"), "--inducing", str(M), "--batch", str(BATCH),
             "--round-ms", str(ROUND_MS), "--connect", f"tcp/127.0.0.1:{port}",
             "--until-points", str(2 * ROWS), "--linger", "15", "--timeout", "60"],
            capture_output=True, text=True, timeout=120)
        assert agent.returncode == 0, agent.stderr + (tmp_path / "node.log").read_text()[-3000:]
        py = json.loads(agent.stdout.strip().splitlines()[-1])
        st = status(coolgp_bin, port, fleet, 1)
    finally:
        node.terminate()
        try:
            node.wait(timeout=20)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
    # Both hold all the data, under the same vocabulary, and nothing was refused.
    assert py["points"] == ROWS and py["fleet_points"] == 2 * ROWS
    assert st["points"] == ROWS and st["fleet_points"] == 2 * ROWS
    assert st["fingerprint"] == py["fingerprint"]
    assert py["rejected"] == {} and sum(st["rejected"].values()) == 0, (py["rejected"], st["rejected"])
    assert py["accepted"] > 0 and st["messages_accepted"] > 0
    # The same fused q(u) at both ends: T1 = K + D1, T2 = D2 (a sum of two excesses is the
    # same in either order, to rounding).
    vocab = coolgp.Vocabulary(M, 2, 0)
    f = st["fused"]
    d1 = np.zeros((M, M))
    d1[np.triu_indices(M)] = f["d1_upper"]
    d1 = d1 + np.triu(d1, 1).T
    t1_py, t2_py = np.array(py["fused_t1"]), np.array(py["fused_t2"])
    np.testing.assert_allclose(vocab.k + d1, t1_py, rtol=1e-12, atol=1e-12 * np.abs(t1_py).max())
    np.testing.assert_allclose(f["d2"], t2_py, rtol=1e-12, atol=1e-12 * np.abs(t2_py).max())
    # The node's checkpoint loads in Python (with the node's vocabulary).
    a = coolgp.Agent.load(tmp_path / "state1" / "checkpoint.safetensors", vocab=vocab)
    assert a.id == 1 and a.points == ROWS and a.neighbors == [2]
    with pytest.raises(ValueError, match="pass vocab="):
        coolgp.Agent.load(tmp_path / "state1" / "checkpoint.safetensors")
