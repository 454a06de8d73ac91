"""Bad input raises ValueError or TypeError with a clear message and leaves the agent
unchanged (spec §9 for messages); hostile payloads are refused with the reason."""
import struct

import numpy as np
import pytest

import coolgp
from conftest import block


def state(agent, x):
    """Everything observable about an agent."""
    t1, t2 = agent.natural_params(fused=True)
    o1, o2 = agent.natural_params(fused=False)
    return (agent.points, agent.blocks, agent.fleet_points, agent.round, agent.neighbors_heard,
            t1.tobytes(), t2.tobytes(), o1.tobytes(), o2.tobytes(),
            agent.projection["mean"].tobytes(), agent.predict(x)[0].tobytes())


@pytest.fixture
def fleet():
    vocab = coolgp.Vocabulary(inducing=8, latent_dim=2, seed=0)
    a, b = coolgp.Agent(1, vocab, 2), coolgp.Agent(2, vocab, 2)
    a.neighbors, b.neighbors = [2], [1]
    x, y = block(np.random.default_rng(0), 40, 2)
    a.observe(x, y)
    b.observe(x[:10], y[:10])
    (_, payload), = a.tick()
    return a, b, x, y, payload


@pytest.mark.parametrize(
    "xf, yf, exc, match",
    [
        (lambda x: np.where((np.arange(40) == 3)[:, None] & (np.arange(2) == 1), np.nan, x), None,
         ValueError, "X: non-finite value NaN at flat index 7"),
        (None, lambda y: np.where(np.arange(len(y)) == 5, np.inf, y), ValueError, "y: non-finite value inf at flat index 5"),
        (lambda x: x[:, :1], None, ValueError, "X: expected 2 column"),
        (lambda x: x[:, 0], None, ValueError, "X: expected a 2-d array.*reshape"),
        (lambda x: x[None], None, ValueError, "X: expected a 2-d array"),
        (None, lambda y: y[:-1], ValueError, "y: expected length 40"),
        (None, lambda y: y[:, None], ValueError, "y: expected a 1-d array"),
        (lambda x: [["a", "b"]] * len(x), None, TypeError, "X: cannot convert to a float64 array"),
        (lambda x: {"not": "an array"}, None, TypeError, "X: cannot convert"),
        (None, lambda y: np.array([object()] * len(y)), TypeError, "y: cannot convert"),
        (lambda x: x + 1j, None, TypeError, "X: cannot convert"),
    ],
)
def test_bad_blocks_leave_the_agent_unchanged(fleet, xf, yf, exc, match):
    _, b, x, y, _ = fleet
    before = state(b, x)
    bx = xf(x.copy()) if xf else x
    by = yf(y.copy()) if yf else y
    with pytest.raises(exc, match=match):
        b.observe(bx, by)
    assert state(b, x) == before


def test_nan_message_in_x_is_exact():
    # The first NaN is named by its row-major index (row 3, column 1 of 2 columns = 7).
    v = coolgp.Vocabulary(inducing=4, latent_dim=2, seed=0)
    a = coolgp.Agent(1, v, 2)
    x = np.zeros((5, 2))
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="index 7"):
        a.observe(x, np.zeros(5))
    assert a.points == 0


def test_convertible_inputs_are_accepted(fleet):
    _, b, x, y, _ = fleet
    b.observe(x.tolist(), y.tolist())  # lists
    b.observe(x.astype(np.float32), y.astype(np.int64))  # other numeric dtypes
    b.observe(np.asfortranarray(x), y)  # column-major
    b.observe(x[::2], y[::2])  # strided views
    assert b.points == 10 + 40 + 40 + 40 + 20
    m1 = b.predict(x)[0]
    np.testing.assert_array_equal(m1, b.predict(np.asfortranarray(x))[0])
    np.testing.assert_array_equal(m1, b.predict(x.tolist())[0])


def test_bad_predict_input(fleet):
    _, b, x, _, _ = fleet
    with pytest.raises(ValueError, match="non-finite"):
        b.predict(np.full((2, 2), np.nan))
    with pytest.raises(ValueError, match="expected 2 column"):
        b.predict(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="cannot convert"):
        b.predict("abc")


def flip(payload, offset, value):
    p = bytearray(payload)
    p[offset] = value
    return bytes(p)


def test_hostile_payloads_are_rejected_with_the_reason(fleet):
    a, b, x, _, payload = fleet
    before = state(b, x)
    rng = np.random.default_rng(7)
    nan = struct.pack("<d", float("nan"))
    cases = [
        (b"", "decode"),
        (b"\x00" * 10, "decode"),
        (payload[:-1], "decode"),
        (payload + b"\x00", "decode"),
        (payload[: len(payload) // 2], "decode"),
        (bytes(rng.integers(0, 256, size=len(payload), dtype=np.uint8)), "decode"),
        (flip(payload, 3, 2), "decode"),  # version 2 (signed envelope): not for this codec
        (flip(payload, 3, 99), "decode"),
        (payload[:-8] + nan, "non_finite"),
    ]
    for bad, reason in cases:
        with pytest.raises(coolgp.RejectedMessage) as e:
            b.receive(bad)
        assert e.value.args[0] == reason, (e.value.args, reason)
        assert "rejected" in e.value.args[1]
        assert isinstance(e.value, ValueError)
        assert state(b, x) == before
    with pytest.raises(TypeError):
        b.receive("not bytes")
    with pytest.raises(coolgp.RejectedMessage, match="decode"):
        coolgp.message_info(b"garbage")
    # The genuine message is still accepted afterwards, once.
    b.receive(payload)
    with pytest.raises(coolgp.RejectedMessage, match="stale") as e:
        b.receive(payload)
    assert e.value.args[0] == "stale"


def test_protocol_rejections(fleet):
    a, b, x, y, payload = fleet
    vocab = a.vocabulary
    # Wrong receiver: c is not the receiver named in the header.
    c = coolgp.Agent(3, vocab, 2)
    c.neighbors = [1]
    with pytest.raises(coolgp.RejectedMessage) as e:
        c.receive(payload)
    assert e.value.args[0] == "wrong_receiver"
    # Unknown sender: b without a as neighbour.
    b.neighbors = []
    before = state(b, x)
    with pytest.raises(coolgp.RejectedMessage) as e:
        b.receive(payload)
    assert e.value.args[0] == "unknown_sender" and state(b, x) == before
    # Another vocabulary.
    other = coolgp.Agent(2, coolgp.Vocabulary(inducing=8, latent_dim=2, seed=1), 2)
    other.neighbors = [1]
    with pytest.raises(coolgp.RejectedMessage) as e:
        other.receive(payload)
    assert e.value.args[0] == "fingerprint"


def test_bad_constructor_and_settings():
    with pytest.raises(ValueError, match="inducing=M and latent_dim=D"):
        coolgp.Vocabulary()
    with pytest.raises(ValueError, match="need m > 0"):
        coolgp.Vocabulary(0, 2)
    with pytest.raises(ValueError, match="non-finite"):
        coolgp.Vocabulary(z=[[0.0, np.nan]])
    with pytest.raises(TypeError):
        coolgp.Agent(1, "not a vocabulary", 2)
    v = coolgp.Vocabulary(4, 2, 0)
    a = coolgp.Agent(1, v, 2)
    with pytest.raises(TypeError):
        a.neighbors = ["x"]
    with pytest.raises(ValueError, match="finite and > 0"):
        a.set_projection(np.zeros((2, 2)), -np.ones((2, 2)), 1.0, 1.0)
    with pytest.raises(ValueError, match="shape"):
        a.set_projection(np.zeros((3, 2)), np.ones((3, 2)), 1.0, 1.0)
    with pytest.raises(ValueError):
        coolgp.FleetRegressor(agents=0)
    # A negative count names its keyword (pyo3's unsigned conversion raised an unnamed
    # OverflowError).
    for make, name in [
        (lambda: coolgp.FleetRegressor(local_memory=-1), "local_memory"),
        (lambda: coolgp.FleetRegressor(agents=-4), "agents"),
        (lambda: coolgp.Agent(1, v, -2), "input_dim"),
        (lambda: coolgp.Agent(1, v, 2, local_memory=-5), "local_memory"),
        (lambda: coolgp.Vocabulary(-3, 2), "inducing"),
    ]:
        with pytest.raises(ValueError, match=rf"^{name}: expected a non-negative integer, got -\d+$"):
            make()
    with pytest.raises(ValueError, match="topology"):
        coolgp.FleetRegressor(topology="ring").fit(np.zeros((10, 1)), np.zeros(10))


def test_a_panic_does_not_cross_into_python():
    # The last fence: a Rust panic inside a call becomes RuntimeError, and the interpreter
    # (and every agent) carries on.
    from coolgp import _coolgp

    with pytest.raises(RuntimeError, match="internal error in coolgp.*deliberate panic"):
        _coolgp._panic_fence_check()
    a = coolgp.Agent(1, coolgp.Vocabulary(4, 1, 0), 1)
    a.observe([[0.0], [1.0]], [0.0, 1.0])
    assert a.points == 2
