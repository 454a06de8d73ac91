#!/usr/bin/env python3
"""Read a coolgp node checkpoint with numpy, verify its checksum, and predict from it.

    pip install safetensors numpy
    python3 examples/read_checkpoint.py STATE_DIR/checkpoint.safetensors [--at 0,0 1,-1]

The format (docs/NODE.md): every tensor is float64, row-major; metadata `coolgp` is JSON.
The fused posterior over the inducing outputs u = f(Z) is N(posterior/mean, posterior/cov);
in K-form it is T1 = fused/t1 = K + D1, T2 = fused/t2.
"""
import argparse
import hashlib
import json
import struct
import sys

import numpy as np
from safetensors.numpy import load_file


def read_metadata(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return header.get("__metadata__", {})


def checksum(tensors, meta_json):
    """SHA-256 over (name, 0x00, shape as u64 LE, data) per tensor in name order, then the JSON."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f8")
        h.update(name.encode() + b"\0")
        for s in a.shape:
            h.update(struct.pack("<Q", s))
        h.update(a.tobytes())
    h.update(meta_json.encode())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--at", nargs="*", metavar="X1,X2,...", help="inputs for a mean prediction")
    args = ap.parse_args()

    t = load_file(args.checkpoint)
    md = read_metadata(args.checkpoint)
    if md.get("format") != "coolgp-checkpoint":
        sys.exit("not a coolgp checkpoint")
    ok = checksum(t, md["coolgp"]) == md["sha256"]
    meta = json.loads(md["coolgp"])
    print(f"fleet {meta['fleet']!r} agent {meta['id']}: {meta['blocks']} blocks, "
          f"{meta['points']} points acknowledged, stream offset {meta['stream']['offset']}, "
          f"checksum {'ok' if ok else 'MISMATCH'}")
    z, k = t["vocab/z"], t["vocab/k"]
    mean, cov = t["posterior/mean"], t["posterior/cov"]
    print(f"m = {z.shape[0]}, d' = {z.shape[1]}, fused points = {t['fused/points'][0]:.0f}")
    print(f"E[u] (first 5) = {np.array2string(mean[:5], precision=4)}")
    print(f"sd[u] (first 5) = {np.array2string(np.sqrt(np.diag(cov))[:5], precision=4)}")
    if args.at:
        # Mean prediction with the point estimate W = M of q(W) (the node's own prediction also
        # integrates over q(W); this is the plug-in approximation, enough for a sanity check).
        x = np.array([[float(v) for v in r.split(",")] for r in args.at])
        # Inputs must be standardized like the node's (--standardize), outputs likewise.
        w = t["theta/mu"]                        # [d', d]
        sigma_s = np.exp(t["theta/log_sigma_s"][0])
        zx = x @ w.T                             # [n, d']
        d2 = ((zx[:, None, :] - z[None, :, :]) ** 2).sum(-1)
        kxu = sigma_s * np.exp(-0.5 * d2)        # k_fu(x, z) = σ_s exp(-½‖Wx − z‖²)
        alpha = np.linalg.solve(k, mean)         # K⁻¹ E[u]
        print("plug-in mean at", args.at, "=", np.array2string(kxu @ alpha, precision=4))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
