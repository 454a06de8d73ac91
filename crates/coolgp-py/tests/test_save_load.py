"""Agent.save / Agent.load: the node's checkpoint format (docs/NODE.md), bit-identical
behaviour after a round trip, and clear errors for foreign or corrupt files."""
import json
import struct

import numpy as np
import pytest

import coolgp
from conftest import block


def make(mode="frozen", **kw):
    vocab = coolgp.Vocabulary(inducing=12, latent_dim=2, seed=3)
    a = coolgp.Agent(1, vocab, 3, mode=mode, **kw)
    b = coolgp.Agent(2, vocab, 3, mode=mode, **kw)
    a.neighbors, b.neighbors = [2], [1]
    rng = np.random.default_rng(0)
    a.observe(*block(rng, 60, 3))
    b.observe(*block(rng, 30, 3))
    for _, p in b.tick():
        a.receive(p)
    return a, b, rng


@pytest.mark.parametrize("mode", ["frozen", "exact", "importance"])
def test_round_trip_is_exact(tmp_path, mode):
    a, b, rng = make(mode)
    path = tmp_path / "a.safetensors"
    a.save(path)
    a2 = coolgp.Agent.load(str(path))
    assert (a2.id, a2.points, a2.blocks, a2.round, a2.neighbors, a2.fleet_points) == (
        a.id, a.points, a.blocks, a.round, a.neighbors, a.fleet_points)
    assert a2.config == a.config and a2.vocabulary == a.vocabulary
    xt, _ = block(rng, 50, 3)
    for fused in (True, False):
        for u, v in zip(a.predict(xt, fused=fused), a2.predict(xt, fused=fused)):
            np.testing.assert_array_equal(u, v)
    # Both continue identically: the same block and the same next message.
    x, y = block(rng, 25, 3)
    a.observe(x, y)
    a2.observe(x, y)
    for u, v in zip(a.natural_params(), a2.natural_params()):
        np.testing.assert_array_equal(u, v)
    assert a.tick() == a2.tick()


def test_shared_projection_mode_is_kept(tmp_path):
    a, _, _ = make(projection="shared")
    a.save(tmp_path / "a.safetensors")
    assert coolgp.Agent.load(tmp_path / "a.safetensors").config["projection"] == "shared"


def read_header(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw, n


def test_file_is_the_node_checkpoint_format(tmp_path):
    a, _, _ = make()
    path = tmp_path / "a.safetensors"
    a.save(path, fleet="lab", inputs=["u", "v", "w"], target="t")
    header, _, _ = read_header(path)
    meta = header["__metadata__"]
    assert meta["format"] == "coolgp-checkpoint" and meta["format_version"] == "2"
    node = json.loads(meta["coolgp"])
    assert (node["fleet"], node["id"], node["inputs"], node["target"]) == ("lab", 1, ["u", "v", "w"], "t")
    assert node["fingerprint"] == a.vocabulary.fingerprint and node["points"] == 60
    assert len(meta["sha256"]) == 64
    # Row-major float64 tensors with the documented names and shapes.
    assert header["vocab/z"]["shape"] == [12, 2] and header["vocab/z"]["dtype"] == "F64"
    assert header["theta/mu"]["shape"] == [2, 3]
    assert header["fused/t1"]["shape"] == [12, 12]
    assert header["inbox/2/d1"]["shape"] == [12, 12]
    z = np.frombuffer(tensor_bytes(path, "vocab/z"), dtype="<f8").reshape(12, 2)
    np.testing.assert_array_equal(z, a.vocabulary.z)
    t1 = np.frombuffer(tensor_bytes(path, "fused/t1"), dtype="<f8").reshape(12, 12)
    np.testing.assert_array_equal(t1, a.natural_params(fused=True)[0])


def tensor_bytes(path, name):
    header, raw, n = read_header(path)
    start, end = header[name]["data_offsets"]
    return raw[8 + n + start : 8 + n + end]


def test_bad_files(tmp_path):
    a, _, _ = make()
    path = tmp_path / "a.safetensors"
    a.save(path)
    with pytest.raises(OSError):
        coolgp.Agent.load(tmp_path / "missing.safetensors")
    (tmp_path / "junk").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a safetensors file"):
        coolgp.Agent.load(tmp_path / "junk")
    # One flipped bit in a tensor: the checksum refuses it.
    header, raw, n = read_header(path)
    start, _ = header["theta/mu"]["data_offsets"]
    bad = bytearray(raw)
    bad[8 + n + start] ^= 1
    (tmp_path / "bad.safetensors").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match="checksum mismatch"):
        coolgp.Agent.load(tmp_path / "bad.safetensors")
    # Another vocabulary.
    with pytest.raises(ValueError, match="written under vocabulary"):
        coolgp.Agent.load(path, vocab=coolgp.Vocabulary(inducing=12, latent_dim=2, seed=4))
    # The right one given explicitly works.
    assert coolgp.Agent.load(path, vocab=a.vocabulary).points == 60
    with pytest.raises(OSError):
        a.save(tmp_path / "no" / "such" / "dir" / "a.safetensors")
    with pytest.raises(ValueError, match="inputs"):
        a.save(path, inputs=["only-one"])
