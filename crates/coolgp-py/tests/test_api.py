"""The API of issue 9, called as a user would."""
import numpy as np
import pytest

import coolgp
from conftest import block


def rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


@pytest.fixture
def pair():
    vocab = coolgp.Vocabulary(inducing=30, latent_dim=2, seed=0)
    a = coolgp.Agent(1, vocab, input_dim=2)
    b = coolgp.Agent(2, vocab, input_dim=2)
    a.neighbors = [2]
    b.neighbors = [1]
    return vocab, a, b


def test_version_and_vocabulary():
    assert isinstance(coolgp.__version__, str) and coolgp.__version__.count(".") == 2
    v = coolgp.Vocabulary(inducing=30, latent_dim=2, seed=0)
    assert (v.inducing, v.latent_dim, v.seed) == (30, 2, 0)
    assert isinstance(v.fingerprint, str) and len(v.fingerprint) == 64
    int(v.fingerprint, 16)
    assert v.z.shape == (30, 2) and v.k.shape == (30, 30)
    # The default design is deterministic; another seed is another vocabulary.
    assert coolgp.Vocabulary(30, 2, 0).fingerprint == v.fingerprint
    assert coolgp.Vocabulary(30, 2, 1).fingerprint != v.fingerprint
    assert coolgp.Vocabulary(30, 2, 0) == v
    # K = k(Z, Z) + εI with the unit squared-exponential kernel.
    z = v.z
    sq = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(v.k, np.exp(-0.5 * sq) + v.jitter * np.eye(30), rtol=1e-12, atol=1e-14)
    # Explicit Z.
    w = coolgp.Vocabulary(z=z, seed=0, jitter=v.jitter)
    assert w.fingerprint == v.fingerprint


def test_vocabulary_file_round_trip(tmp_path):
    v = coolgp.Vocabulary(inducing=12, latent_dim=3, seed=5)
    v.save(tmp_path / "v.json")
    w = coolgp.Vocabulary.load(str(tmp_path / "v.json"))
    assert w.fingerprint == v.fingerprint
    np.testing.assert_array_equal(w.z, v.z)


def test_two_agents_fuse(pair):
    _, a, b = pair
    rng = np.random.default_rng(0)
    x, y = block(rng, 300, 2)
    xt, yt = block(rng, 200, 2)
    a.observe(x, y)
    assert (a.points, a.blocks, b.points) == (300, 1, 0)
    assert a.neighbors == [2] and b.neighbors == [1]
    msgs = a.tick()
    assert [r for r, _ in msgs] == [2]
    assert all(isinstance(p, bytes) for _, p in msgs)
    for receiver, payload in msgs:
        info = coolgp.message_info(payload)
        assert (info["sender"], info["receiver"], info["kind"], info["points"]) == (1, 2, "tree", 300.0)
        assert info["fingerprint"] == a.vocabulary.fingerprint
        b.receive(payload)
    assert b.fleet_points == 300 and b.points == 0 and b.neighbors_heard == 1
    mean, var_f, var_y = b.predict(xt, fused=True)
    for arr in (mean, var_f, var_y):
        assert isinstance(arr, np.ndarray) and arr.shape == (200,) and arr.dtype == np.float64
    assert np.all(var_f > 0) and np.all(var_y > var_f)
    own, _, _ = b.predict(xt, fused=False)
    # b has no data of its own: its own model is the prior (mean 0); fused it learned from a.
    assert np.all(own == 0.0)
    assert rmse(mean, yt) < 0.7 * rmse(own, yt)
    # Fused natural parameters add: T_b,fused = T0 + E_a (b has no data; σ's are shared
    # initially, and a's E under its own q(W) is what it sent).
    t1a, t2a = a.natural_params(fused=False)
    t1b, t2b = b.natural_params(fused=True)
    np.testing.assert_allclose(t1b, t1a, rtol=1e-12)
    np.testing.assert_allclose(t2b, t2a, rtol=1e-12)


def test_tick_to_and_round(pair):
    _, a, b = pair
    a.observe(*block(np.random.default_rng(1), 20, 2))
    assert a.tick_to(7) is None  # not a neighbour
    p = a.tick_to(2)
    assert coolgp.message_info(p)["receiver"] == 2
    b.receive(p)
    r = a.round
    a.round = r + 1000
    assert a.round == r + 1000
    with pytest.raises(ValueError, match="forward"):
        a.round = r
    (_, p2), = a.tick()
    assert coolgp.message_info(p2)["round"] == r + 1001
    b.receive(p2)


def test_config_keywords():
    v = coolgp.Vocabulary(10, 2, 0)
    a = coolgp.Agent(3, v, 2, mode="importance", samples=4, projection="shared", learn=False, seed=9)
    assert a.config == {"mode": "importance(k=4)", "projection": "shared", "fusion": "tree",
                        "learn": False, "seed": 9, "projection_group": None,
                        "local": {"memory": 500, "policy": "reservoir", "kernel": "learned"}}
    assert coolgp.Agent(3, v, 2).config["seed"] == 3  # default seed: the id, as the node
    p = coolgp.Agent(3, v, 2, fusion="push-sum", fleet_size=5, mode="exact")
    assert p.config["fusion"] == "push-sum(s=5)" and p.config["mode"] == "exact"
    for bad in (dict(mode="nope"), dict(projection="nope"), dict(fusion="push-sum"),
                dict(fusion="nope"), dict(projection="shared", fusion="push-sum", fleet_size=3)):
        with pytest.raises(ValueError):
            coolgp.Agent(3, v, 2, **bad)
    with pytest.raises(ValueError, match="input dimension"):
        coolgp.Agent(3, v, 0)


def test_learning_moves_the_projection():
    v = coolgp.Vocabulary(10, 2, 0)
    a = coolgp.Agent(1, v, 2)
    frozen = coolgp.Agent(1, v, 2, learn=False)
    x, y = block(np.random.default_rng(2), 50, 2)
    a.observe(x, y)
    frozen.observe(x, y)
    mean0, std0 = v.initial_projection(2)
    np.testing.assert_array_equal(frozen.projection["mean"], mean0)
    np.testing.assert_array_equal(frozen.projection["std"], std0)
    assert not np.array_equal(a.projection["mean"], mean0)


def test_fleet_regressor():
    rng = np.random.default_rng(3)
    x, y = block(rng, 800, 2)
    xt, yt = block(rng, 300, 2)
    reg = coolgp.FleetRegressor(agents=4, inducing=30).fit(x, y)
    assert isinstance(reg, coolgp.FleetRegressor)
    assert reg.n_agents_ == 4 and sum(reg.points_) == 800
    assert reg.fleet_points_ == [800.0] * 4  # every agent's fused model holds all the data
    mean = reg.predict(xt)
    mean2, std = reg.predict(xt, return_std=True)
    np.testing.assert_array_equal(mean, mean2)
    assert mean.shape == std.shape == (300,) and np.all(std > 0)
    _, std_y = reg.predict(xt, return_std=True, include_noise=True)
    assert np.all(std_y > std)
    constant = rmse(np.full_like(yt, y.mean()), yt)
    assert rmse(mean, yt) < 0.5 * constant
    assert reg.score(xt, yt) > 0.75
    assert reg.get_params()["agents"] == 4


def test_fleet_regressor_site_memory_for_time_ordered_rows():
    # Rows in time order with drifting inputs: the fleet projection's stream memory keeps every
    # block's evidence about W, so it fits the whole range better than the recent one.
    rng = np.random.default_rng(5)
    n = 1200
    x = np.column_stack([np.linspace(-2, 2, n) + 0.3 * rng.normal(size=n), rng.normal(size=n)])
    y = np.sin(x[:, 0] - 0.5 * x[:, 1]) + 0.1 * rng.normal(size=n)
    xt = np.column_stack([rng.uniform(-2, 2, 400), rng.normal(size=400)])
    yt = np.sin(xt[:, 0] - 0.5 * xt[:, 1])
    fits = {}
    for memory in ("recent", "stream"):
        # local_memory=0: the global fused model's own answer (the subject here); with the
        # default memory, predict adds the agents' residual corrections.
        reg = coolgp.FleetRegressor(agents=3, inducing=30, projection="fleet",
                                    site_memory=memory, local_memory=0).fit(x, y)
        assert reg.get_params()["site_memory"] == memory
        fits[memory] = rmse(reg.predict(xt), yt)
    assert fits["stream"] < 0.8 * fits["recent"], fits  # measured: 0.011 against 0.023
    assert coolgp.FleetRegressor().get_params()["site_memory"] is None
    with pytest.raises(ValueError, match="unknown site memory 'forever'"):
        coolgp.FleetRegressor(projection="fleet", site_memory="forever")
    with pytest.raises(ValueError, match="site_memory needs projection='fleet'"):
        coolgp.FleetRegressor(site_memory="stream")


def test_fleet_regressor_groups_and_scale():
    rng = np.random.default_rng(4)
    x, y = block(rng, 600, 2)
    groups = np.array(["north", "south", "east"])[rng.integers(0, 3, size=600)]
    # Original units: a shifted, scaled target and inputs are standardized inside.
    reg = coolgp.FleetRegressor(agents=99, inducing=20).fit(100 + 10 * x, 1000 + 50 * y, groups=groups)
    assert reg.n_agents_ == 3
    assert sorted(reg.points_) == sorted(int((groups == g).sum()) for g in ("north", "south", "east"))
    mean = reg.predict(100 + 10 * x[:100])
    assert rmse(mean, 1000 + 50 * y[:100]) < 0.5 * 50 * y.std()
    with pytest.raises(ValueError, match="not fitted"):
        coolgp.FleetRegressor().predict(x)
    with pytest.raises(ValueError, match="one label per row"):
        coolgp.FleetRegressor().fit(x, y, groups=groups[:10])


def test_help_and_docstrings():
    for obj in (coolgp.Agent, coolgp.Agent.observe, coolgp.Agent.tick, coolgp.Agent.receive,
                coolgp.Agent.predict, coolgp.Vocabulary, coolgp.FleetRegressor, coolgp.simulate,
                coolgp.message_info):
        assert obj.__doc__ and len(obj.__doc__) > 40, obj
    assert "observe" in coolgp.Agent.__doc__ or "observe" in coolgp.Agent.observe.__doc__


def test_readme_example_runs(capsys):
    from conftest import REPO

    text = (REPO / "README.md").read_text()
    start = text.index("```python\nimport numpy as np, coolgp")
    code = text[start + len("```python\n") : text.index("```", start + 10)]
    exec(compile(code, "README.md", "exec"), {})
    assert capsys.readouterr().out.split() == ["250", "500.0"]


def test_package_docstring_example():
    import doctest

    result = doctest.testmod(coolgp, verbose=False)
    assert result.attempted >= 8 and result.failed == 0


def test_fleet_projection_agents_predict_identically_after_fusion(tmp_path):
    # Issue 8 / spec §14: with projection="fleet" the agents learn one q(W) as a sum of sites;
    # once both hold the same sums they predict identically, and a saved agent reloads as is.
    v = coolgp.Vocabulary(inducing=20, latent_dim=2, seed=0)
    a = coolgp.Agent(1, v, input_dim=2, projection="fleet")
    b = coolgp.Agent(2, v, input_dim=2, projection="fleet")
    a.neighbors = [2]
    b.neighbors = [1]
    rng = np.random.default_rng(0)
    for _ in range(5):
        for agent in (a, b):
            x = rng.normal(size=(30, 2))
            agent.observe(x, np.sin(x[:, 0]) + 0.1 * rng.normal(size=30))
    for _ in range(2):
        for _, payload in a.tick():
            b.receive(payload)
        for _, payload in b.tick():
            a.receive(payload)
    assert a.fleet_points == b.fleet_points == 300
    xt = rng.normal(size=(7, 2))
    ma, _, va = a.predict(xt)
    mb, _, vb = b.predict(xt)
    np.testing.assert_allclose(ma, mb, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(va, vb, rtol=1e-9, atol=1e-12)
    info = coolgp.message_info(a.tick()[0][1])
    assert info["has_site"] and info["kind"] == "tree"
    # A per-agent agent's messages carry no site sums.
    p = coolgp.Agent(1, v, input_dim=2)
    p.neighbors = [2]
    assert not coolgp.message_info(p.tick()[0][1])["has_site"]
    a.save(tmp_path / "a.safetensors")
    a2 = coolgp.Agent.load(tmp_path / "a.safetensors")
    np.testing.assert_array_equal(a2.predict(xt)[0], ma)


def test_projection_groups(tmp_path):
    # Spec §14 with groups: agents of group "a" share one q(W); a "b" agent between them keeps
    # its own, yet relays a's site sums and fuses q(u) with both. Mixed fleets are refused.
    v = coolgp.Vocabulary(inducing=20, latent_dim=2, seed=0)
    groups = ["a", "b", "a"]
    agents = [coolgp.Agent(i, v, input_dim=2, projection="fleet", projection_group=g)
              for i, g in enumerate(groups)]
    for i, agent in enumerate(agents):
        agent.neighbors = [j for j in (i - 1, i + 1) if 0 <= j < 3]
    rng = np.random.default_rng(1)
    for _ in range(4):
        for k, agent in enumerate(agents):
            x = rng.normal(size=(30, 2))
            z = x[:, 0] if groups[k] == "a" else x[:, 1]
            agent.observe(x, np.sin(z) + 0.1 * rng.normal(size=30))
    for _ in range(6):
        out = [(to, p) for agent in agents for to, p in agent.tick()]
        for to, payload in out:
            agents[to].receive(payload)
    assert [a.fleet_points for a in agents] == [360.0] * 3
    xt = rng.normal(size=(5, 2))
    m0, m1, m2 = (a.predict(xt)[0] for a in agents)
    np.testing.assert_allclose(m0, m2, rtol=1e-9, atol=1e-12)
    assert np.max(np.abs(m0 - m1)) > 1e-6
    assert agents[0].config["projection_group"] == agents[2].config["projection_group"]
    assert agents[0].config["projection_group"] != agents[1].config["projection_group"]
    with pytest.raises(ValueError, match="projection='fleet'"):
        coolgp.Agent(9, v, input_dim=2, projection_group="a")
    plain = coolgp.Agent(1, v, input_dim=2, projection="fleet")
    plain.neighbors = [0]
    with pytest.raises(coolgp.RejectedMessage, match="bad_site"):
        plain.receive(agents[0].tick_to(1))
    agents[0].save(tmp_path / "a.safetensors")
    back = coolgp.Agent.load(tmp_path / "a.safetensors")
    assert back.config["projection_group"] == agents[0].config["projection_group"]
    np.testing.assert_array_equal(back.predict(xt)[0], m0)


def test_site_settings(tmp_path):
    # Agent(site={...}) tunes the fleet projection's site update as the node's --site-* flags
    # do; the settings are reported, kept by save/load, and bad ones are refused by name.
    v = coolgp.Vocabulary(inducing=20, latent_dim=2, seed=0)
    a = coolgp.Agent(0, v, input_dim=2, projection="fleet", site={"window": 40, "damping": 0.5})
    s = a.config["site"]
    assert (s["window"], s["damping"], s["fleet_damping"]) == (40, 0.5, 0.01)
    assert "site" not in coolgp.Agent(1, v, input_dim=2).config
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = rng.normal(size=(10, 2))
        a.observe(x, np.sin(x[:, 0]))
    a.save(tmp_path / "a.safetensors")
    back = coolgp.Agent.load(tmp_path / "a.safetensors")
    assert back.config["site"] == s
    xt = rng.normal(size=(4, 2))
    np.testing.assert_array_equal(back.predict(xt)[0], a.predict(xt)[0])
    with pytest.raises(ValueError, match="unknown key 'windw'"):
        coolgp.Agent(2, v, input_dim=2, projection="fleet", site={"windw": 40})
    with pytest.raises(ValueError, match="fleet damping must be in"):
        coolgp.Agent(2, v, input_dim=2, projection="fleet", site={"fleet_damping": 1.5})
    with pytest.raises(ValueError, match="window must be a whole number"):
        coolgp.Agent(2, v, input_dim=2, projection="fleet", site={"window": 2.5})
    with pytest.raises(ValueError, match="projection='fleet'"):
        coolgp.Agent(2, v, input_dim=2, site={"damping": 0.5})
    with pytest.raises(ValueError, match="unknown projection 'fleeet': use 'per-agent'"):
        coolgp.Agent(2, v, input_dim=2, projection="fleeet")
    with pytest.raises(ValueError, match="at most 100000"):
        coolgp.Agent(2, v, input_dim=2, projection="fleet", site={"window": 10**30})
    with pytest.raises(TypeError, match="'window' must be a number, got str"):
        coolgp.Agent(2, v, input_dim=2, projection="fleet", site={"window": "abc"})
    assert s["memory"] == "stream"  # the default (issue 18)
    st = coolgp.Agent(3, v, input_dim=2, projection="fleet", site={"memory": "stream"})
    assert st.config["site"]["memory"] == "stream"
    for _ in range(3):
        x = rng.normal(size=(10, 2))
        st.observe(x, np.sin(x[:, 0]))
    st.save(tmp_path / "s.safetensors")
    st_back = coolgp.Agent.load(tmp_path / "s.safetensors")
    assert st_back.config["site"] == st.config["site"]
    np.testing.assert_array_equal(st_back.predict(xt)[0], st.predict(xt)[0])
    with pytest.raises(ValueError, match="unknown site memory 'forever'"):
        coolgp.Agent(2, v, input_dim=2, projection="fleet", site={"memory": "forever"})


def test_sizes_beyond_the_machine_are_refused():
    # k = 10^9 importance samples of a 20 × 20 matrix need 3200 GB: refused by name.
    v = coolgp.Vocabulary(inducing=20, latent_dim=2, seed=0)
    with pytest.raises(ValueError, match=r"samples=1000000000 needs 3200 GB for the importance "
                                         r"caches \(k × m² × 8 bytes at m = 20\)"):
        coolgp.Agent(0, v, input_dim=2, mode="importance", samples=10**9)
    assert coolgp.Agent(0, v, input_dim=2, mode="importance", samples=20).input_dim == 2
    # m = 10^6 inducing inputs: one m × m matrix is 8000 GB, refused before it is built.
    with pytest.raises(ValueError, match=r"inducing=1000000 needs 8000 GB for one m × m matrix"):
        coolgp.Vocabulary(inducing=10**6, latent_dim=2)
    with pytest.raises(ValueError, match=r"inducing=100000 needs 320 GB for one m × m matrix per "
                                         r"agent \(4 agents × m² × 8 bytes\)"):
        coolgp.FleetRegressor(agents=4, inducing=100_000)
