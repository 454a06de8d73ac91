"""Shared fixtures: where the spec's vectors and the `coolgp` binary are."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def vectors_dir():
    """The spec's vectors: $COOLGP_SPEC_VECTORS, else the copy the Rust tests read
    (crates/coolgp/tests/vectors), else ../shared/spec/vectors beside the repository."""
    candidates = [
        os.environ.get("COOLGP_SPEC_VECTORS"),
        REPO / "crates" / "coolgp" / "tests" / "vectors",
        REPO.parent / "shared" / "spec" / "vectors",
    ]
    for c in candidates:
        if c and (pathlib.Path(c) / "fusion_tree4.json").is_file():
            return pathlib.Path(c)
    pytest.fail(f"spec vectors not found in {candidates}")


def vector(name):
    return json.loads((vectors_dir() / name).read_text())


@pytest.fixture(scope="session")
def coolgp_bin():
    """The `coolgp` binary: $COOLGP, else $CARGO_TARGET_DIR/release/coolgp, else
    <repo>/target/release/coolgp. Missing: the test is skipped, unless
    COOLGP_REQUIRE_BINARY=1 (CI), where it fails."""
    target = os.environ.get("CARGO_TARGET_DIR") or str(REPO / "target")
    path = pathlib.Path(os.environ.get("COOLGP") or pathlib.Path(target) / "release" / "coolgp")
    if not path.is_file():
        msg = f"coolgp binary not found at {path} (cargo build --release -p coolgp-cli --features node)"
        if os.environ.get("COOLGP_REQUIRE_BINARY") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return str(path)


def run(cmd, timeout=120, **kw):
    """Runs a command with a time bound; returns its stdout (raises with stderr on failure)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}:\n{r.stderr[-4000:]}")
    return r.stdout


def rel_err(got, want):
    """Max-norm relative error max|got − want| / max|want| (as the Rust spec tests)."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, f"shape {got.shape} vs {want.shape}"
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), np.finfo(float).tiny))


def block(rng, n, d):
    """x ~ N(0, I), y = sin(x_0 + x_{d−1}/2) + 0.1 ε."""
    x = rng.normal(size=(n, d))
    y = np.sin(x[:, 0] + 0.5 * x[:, d - 1]) + 0.1 * rng.normal(size=n)
    return x, y
