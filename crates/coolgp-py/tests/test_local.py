"""Issue 19 from Python: the local memory (local_memory=, local_policy=, local_kernel=),
Agent.predict(X, local=True), Agent.local_answers, coolgp.combine_answers (the fleet rule),
FleetRegressor with a memory, and save/load carrying the memory."""
import numpy as np
import pytest

import coolgp
from conftest import block

PARTS = ("global_mean", "global_var", "residual_mean", "residual_var", "residual_prior", "noise_var")


def agent_with_memory(b=40, policy=None, seed=0, **kw):
    vocab = coolgp.Vocabulary(inducing=10, latent_dim=2, seed=0)
    a = coolgp.Agent(1, vocab, 2, local_memory=b, local_policy=policy, seed=seed, **kw)
    rng = np.random.default_rng(seed)
    for _ in range(6):
        x, y = block(rng, 20, 2)
        # A fine structure the global model (10 inducing inputs) cannot hold.
        a.observe(x, y + 0.5 * np.sin(6 * x[:, 1]))
    return a, rng


def test_the_memory_is_bounded_reported_and_corrects_the_prediction():
    a, rng = agent_with_memory(40, "reservoir")
    assert a.local_points == 40
    assert a.config["local"] == {"memory": 40, "policy": "reservoir", "kernel": "learned"}
    x, _ = block(rng, 15, 2)
    glob = a.predict(x)
    loc = a.predict(x, local=True)
    ans = a.local_answers(x)
    assert set(PARTS) <= set(ans)
    assert np.any(ans["residual_mean"] != 0.0)
    # mean = global + residual; var_f = global + residual; var_y = var_f + noise.
    np.testing.assert_allclose(loc[0], ans["global_mean"] + ans["residual_mean"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(loc[1], ans["global_var"] + ans["residual_var"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(loc[2], loc[1] + ans["noise_var"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ans["global_mean"], glob[0])
    assert not np.allclose(loc[0], glob[0])


def test_the_default_memory_is_500_rows_of_a_reservoir():
    vocab = coolgp.Vocabulary(inducing=10, latent_dim=2, seed=0)
    a = coolgp.Agent(1, vocab, 2)
    a.observe(*block(np.random.default_rng(3), 30, 2))
    assert a.config["local"] == {"memory": 500, "policy": "reservoir", "kernel": "learned"}
    assert a.local_points == 30


def test_without_memory_local_predictions_are_the_global_ones():
    vocab = coolgp.Vocabulary(inducing=10, latent_dim=2, seed=0)
    a = coolgp.Agent(1, vocab, 2, local_memory=0)
    rng = np.random.default_rng(3)
    a.observe(*block(rng, 30, 2))
    x, _ = block(rng, 5, 2)
    assert a.local_points == 0 and "local" not in a.config
    for got, want in zip(a.predict(x, local=True), a.predict(x)):
        np.testing.assert_array_equal(got, want)
    ans = a.local_answers(x)
    assert np.all(ans["residual_mean"] == 0.0) and np.all(ans["residual_var"] == 0.0)


def test_bad_memory_keywords_are_refused_by_name():
    vocab = coolgp.Vocabulary(inducing=10, latent_dim=2, seed=0)
    with pytest.raises(ValueError, match="local_policy 'newest'"):
        coolgp.Agent(1, vocab, 2, local_memory=10, local_policy="newest")
    with pytest.raises(ValueError, match="local_kernel 'rbf'"):
        coolgp.Agent(1, vocab, 2, local_memory=10, local_kernel="rbf")
    with pytest.raises(ValueError, match="local_memory: expected a non-negative integer, got -1"):
        coolgp.Agent(1, vocab, 2, local_memory=-1)
    with pytest.raises(ValueError, match="fleet_rule 'vote'"):
        coolgp.FleetRegressor(local_memory=10, fleet_rule="vote")
    with pytest.raises(ValueError, match="local_policy 'newest'"):
        coolgp.FleetRegressor(local_memory=10, local_policy="newest")


def test_save_and_load_carry_the_memory(tmp_path):
    a, rng = agent_with_memory(30, "spread", local_kernel="global")
    path = tmp_path / "a.safetensors"
    a.save(path)
    b = coolgp.Agent.load(path)
    assert b.local_points == a.local_points == 30
    assert b.config["local"] == a.config["local"]
    x, _ = block(rng, 9, 2)
    # Restoring factors the memory once where the agent updated its factor row by row: the
    # same answers to rounding.
    for got, want in zip(b.predict(x, local=True), a.predict(x, local=True)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # It keeps learning the same way after the reload.
    xb, yb = block(rng, 20, 2)
    a.observe(xb, yb)
    b.observe(xb, yb)
    for got, want in zip(b.predict(x, local=True), a.predict(x, local=True)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_combine_answers_is_the_fleet_rule_point_by_point():
    rng = np.random.default_rng(5)
    agents = [agent_with_memory(25, seed=s)[0] for s in range(3)]
    x, _ = block(rng, 12, 2)
    answers = [a.local_answers(x) for a in agents]
    mv = coolgp.combine_answers(answers, rule="min-variance")
    var_y = np.stack([a["var_y"] for a in answers])
    pick = np.argmin(var_y, axis=0)  # ties: the first, as the rule
    for k in PARTS + ("mean", "var_y"):
        want = np.array([answers[pick[p]][k][p] for p in range(len(pick))])
        np.testing.assert_array_equal(mv[k], want)
    # The committee rules keep the agents' mean global part and combine the residuals.
    for rule in ("bcm", "rbcm"):
        c = coolgp.combine_answers(answers, rule=rule)
        np.testing.assert_allclose(
            c["global_mean"], np.mean([a["global_mean"] for a in answers], axis=0), rtol=1e-12
        )
        assert np.all(np.isfinite(c["mean"])) and np.all(c["var_y"] > 0)
    with pytest.raises(ValueError, match="unknown fleet_rule"):
        coolgp.combine_answers(answers, rule="vote")
    with pytest.raises(ValueError):
        coolgp.combine_answers([])
    short = dict(answers[1])
    short = {k: v[:3] for k, v in short.items()}
    with pytest.raises(ValueError, match="same points"):
        coolgp.combine_answers([answers[0], short])


def test_fleet_regressor_with_memory_answers_with_the_fleet_rule():
    rng = np.random.default_rng(11)
    x = rng.uniform(-3, 3, size=(600, 2))
    y = np.sin(x[:, 0]) + 0.6 * np.sin(5 * x[:, 1]) + 0.05 * rng.normal(size=600)
    groups = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0).astype(int)  # four regions
    xt = rng.uniform(-3, 3, size=(50, 2))
    plain = coolgp.FleetRegressor(agents=4, inducing=15, local_memory=0, seed=0)
    plain.fit(x, y, groups=groups)
    assert plain.local_points_ == [0, 0, 0, 0]
    assert coolgp.FleetRegressor().get_params()["fleet_rule"] == "rbcm"  # the default
    f = coolgp.FleetRegressor(
        agents=4, inducing=15, local_memory=60, fleet_rule="min-variance", seed=0
    ).fit(x, y, groups=groups)
    assert all(0 < p <= 60 for p in f.local_points_)
    assert f.get_params()["fleet_rule"] == "min-variance"
    mean, std = f.predict(xt, return_std=True, include_noise=True)
    # min-variance: at each point the answer of the agent with the smallest var_y.
    each = [f.predict(xt, return_std=True, include_noise=True, agent=i) for i in range(4)]
    sd = np.stack([s for _, s in each])
    pick = np.argmin(sd, axis=0)
    want = np.array([each[pick[p]][0][p] for p in range(len(xt))])
    np.testing.assert_allclose(mean, want, rtol=1e-12, atol=1e-12)
    # The fleet's answer is calibrated by one variance scale, measured at fit on the agents'
    # leave-one-out answers (docs/LOCAL.md §10); one agent's answer is not.
    assert plain.var_scale_ == 1.0  # no memory: nothing to calibrate
    assert 1 / 16 <= f.var_scale_ <= 16 and f.var_scale_ != 1.0
    np.testing.assert_allclose(std, sd.min(axis=0) * np.sqrt(f.var_scale_), rtol=1e-12)
    truth = np.sin(xt[:, 0]) + 0.6 * np.sin(5 * xt[:, 1])
    rmse = lambda m: float(np.sqrt(np.mean((m - truth) ** 2)))
    assert rmse(mean) < rmse(plain.predict(xt)), (rmse(mean), rmse(plain.predict(xt)))
    # The default memory (local_memory unset: B = 500) answers with the rule over every agent
    # too, not with agent 0 alone.
    d = coolgp.FleetRegressor(agents=4, inducing=15, fleet_rule="min-variance", seed=0)
    d.fit(x, y, groups=groups)
    assert d.get_params()["local_memory"] is None and all(p > 0 for p in d.local_points_)
    dmean, dstd = d.predict(xt, return_std=True, include_noise=True)
    each = [d.predict(xt, return_std=True, include_noise=True, agent=i) for i in range(4)]
    sd = np.stack([s for _, s in each])
    np.testing.assert_allclose(dstd, sd.min(axis=0) * np.sqrt(d.var_scale_), rtol=1e-12)
    assert not np.allclose(dmean, each[0][0]), "the fleet's answer, not agent 0's"
    rb = coolgp.FleetRegressor(agents=4, inducing=15, local_memory=60, fleet_rule="rbcm", seed=0)
    assert np.all(np.isfinite(rb.fit(x, y, groups=groups).predict(xt)))
    # local_fit: the residual kernel fitted by each agent or once by the fleet on a pooled
    # sample (every agent then holds the same kernel); both answer.
    for fit in ("agent", "fleet"):
        g = coolgp.FleetRegressor(agents=4, inducing=15, local_memory=60, local_fit=fit, seed=0)
        assert g.get_params()["local_fit"] == fit
        assert np.all(np.isfinite(g.fit(x, y, groups=groups).predict(xt)))
    with pytest.raises(ValueError, match="unknown local_fit 'pooled'"):
        coolgp.FleetRegressor(local_memory=10, local_fit="pooled")
    # fleet_rule="auto": the rule with the smallest held-out error, chosen at fit; predict
    # combines with it (docs/LOCAL.md §12).
    auto = coolgp.FleetRegressor(agents=4, inducing=15, local_memory=60, fleet_rule="auto", seed=0)
    assert auto.get_params()["fleet_rule"] == "auto" and auto.fleet_rule_ is None
    auto.fit(x, y, groups=groups)
    assert auto.fleet_rule_ in ("rbcm", "bcm", "min-variance", "most-informed")
    assert 0.0 <= auto.residual_weight_ <= 1.0
    named = coolgp.FleetRegressor(
        agents=4, inducing=15, local_memory=60, fleet_rule=auto.fleet_rule_, seed=0
    ).fit(x, y, groups=groups)
    assert named.fleet_rule_ == auto.fleet_rule_
    np.testing.assert_allclose(auto.predict(xt), named.predict(xt), rtol=1e-12, atol=1e-12)


def test_pickle_carries_the_memory():
    import pickle

    a, rng = agent_with_memory(30, "recent")
    a.neighbors = [2, 3]
    b = pickle.loads(pickle.dumps(a))
    assert (b.id, b.neighbors, b.local_points, b.points) == (a.id, a.neighbors, 30, a.points)
    assert b.config == a.config
    x, _ = block(rng, 9, 2)
    for got, want in zip(b.predict(x, local=True), a.predict(x, local=True)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError):
        coolgp._coolgp._agent_from_checkpoint(b"not a checkpoint")
