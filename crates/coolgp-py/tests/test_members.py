"""Faulty members in a FleetRegressor (issue 29, docs/MEMBERS.md): one group's sensor offset
by +5 is marked, its data leave the fused model and its answers leave predict."""

import numpy as np

import coolgp


def field(offset_group=None, seed=0):
    rng = np.random.default_rng(seed)
    per, k = 300, 6
    x = rng.uniform(-3, 3, size=(per * k, 2))
    y = np.sin(x[:, 0]) + 0.5 * np.cos(2 * x[:, 1]) + 0.1 * rng.normal(size=per * k)
    groups = np.repeat(np.arange(k), per)
    if offset_group is not None:
        y[groups == offset_group] += 5.0
    return x, y, groups


def test_an_offset_group_is_a_suspect_and_left_out():
    xt = np.random.default_rng(9).uniform(-3, 3, size=(400, 2))
    ft = np.sin(xt[:, 0]) + 0.5 * np.cos(2 * xt[:, 1])
    rmse = lambda m: float(np.sqrt(np.mean((m.predict(xt) - ft) ** 2)))
    kw = dict(agents=6, inducing=30, projection="fleet", seed=0)
    x, y, g = field()
    clean = coolgp.FleetRegressor(**kw).fit(x, y, groups=g)
    assert clean.suspects_ == []
    x, y, g = field(offset_group=5)
    faulty = coolgp.FleetRegressor(**kw).fit(x, y, groups=g)
    assert faulty.suspects_ == [5]
    # The others' fused models hold the five honest groups only.
    points = faulty.fleet_points_
    assert points[0] == 1500.0 and points[5] == 1800.0, points
    # Contained, the fleet answers about as well as the clean fleet; far better than the
    # offset would let it.
    assert rmse(faulty) < 2.0 * rmse(clean) < 0.5, (rmse(faulty), rmse(clean))
    # Without a memory the check reads each agent's newest rows: found all the same.
    assert coolgp.FleetRegressor(local_memory=0, **kw).fit(x, y, groups=g).suspects_ == [5]
