"""The robust likelihood from Python (issue 29 item 4, docs/ROBUST.md): `likelihood="robust"`
on FleetRegressor and Agent in every mode and projection, carried by get_params."""

import numpy as np
import pytest

import coolgp


def field(outliers, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, size=(1600, 2))
    y = np.sin(x[:, 0]) + 0.5 * np.cos(2 * x[:, 1]) + 0.1 * rng.normal(size=len(x))
    if outliers:
        # A glitching sensor: 5% of the rows read 20 too high.
        y[rng.random(len(x)) < 0.05] += 20.0
    return x, y


def rmse(model):
    xt = np.random.default_rng(9).uniform(-3, 3, size=(400, 2))
    ft = np.sin(xt[:, 0]) + 0.5 * np.cos(2 * xt[:, 1])
    return float(np.sqrt(np.mean((model.predict(xt) - ft) ** 2)))


def fit(likelihood, outliers):
    x, y = field(outliers)
    kw = dict(agents=4, inducing=30, local_memory=0, seed=0, likelihood=likelihood)
    return rmse(coolgp.FleetRegressor(**kw).fit(x, y))


def test_robust_shrugs_off_outliers_and_costs_little_on_clean_data():
    gauss, robust = fit("gaussian", True), fit("robust", True)
    print(f"5% of rows 20 too high: gaussian {gauss:.4f}, robust {robust:.4f}")
    assert robust < 0.7 * gauss, (robust, gauss)
    gauss, robust = fit("gaussian", False), fit("robust", False)
    print(f"clean: gaussian {gauss:.4f}, robust {robust:.4f}")
    assert abs(robust / gauss - 1) < 0.05, (robust, gauss)


def test_robust_is_taken_in_every_mode_and_bad_values_are_named_in_python_spelling():
    # Every mode and projection keeps each row's weight from its arrival (docs/ROBUST.md §2).
    coolgp.FleetRegressor(projection="fleet", likelihood="robust")
    coolgp.FleetRegressor(mode="importance", likelihood="robust")
    for bad in [0.0, -1.0, float("nan")]:
        with pytest.raises(ValueError, match="robust_c"):
            coolgp.FleetRegressor(likelihood="robust", robust_c=bad)
    with pytest.raises(ValueError, match="likelihood"):
        coolgp.FleetRegressor(likelihood="student")
    with pytest.raises(ValueError, match="robust_c needs likelihood"):
        coolgp.FleetRegressor(robust_c=2.0)
    v = coolgp.Vocabulary(inducing=10, latent_dim=2, seed=0)
    for mode in ["exact", "importance"]:
        coolgp.Agent(0, v, 2, mode=mode, likelihood="robust")
    coolgp.Agent(0, v, 2, projection="fleet", likelihood="robust")
    for bad in [0.0, -1.0, float("nan")]:
        with pytest.raises(ValueError, match="robust_c must be finite and > 0"):
            coolgp.Agent(0, v, 2, likelihood="robust", robust_c=bad)
    coolgp.Agent(0, v, 2, likelihood="robust", robust_c=2.0)
    coolgp.Agent(0, v, 2, likelihood="gaussian")


def test_simulate_takes_the_likelihood_and_refuses_a_nan_threshold():
    # simulate's keywords are the command line's flags (its messages name them so).
    kw = dict(dataset="synthetic", agents=2, inducing=10, max_train=200, max_test=100,
              no_baselines=True, no_central=True, local_memory=0)
    s = coolgp.simulate(**kw, likelihood="robust", robust_c=2.0)
    assert s["likelihood"] == {"name": "robust", "c": 2.0}
    s = coolgp.simulate(**kw, likelihood="robust", projection="fleet")
    assert s["likelihood"] == {"name": "robust", "c": 3.0}
    assert s["projection"] == "fleet"
    # NaN has no JSON form: it must be refused, not read as "not given" (c = 3).
    for bad in [float("nan"), float("inf")]:
        with pytest.raises(ValueError, match="robust_c: expected a finite number"):
            coolgp.simulate(**kw, likelihood="robust", robust_c=bad)


def test_get_params_and_clone_carry_the_likelihood():
    m = coolgp.FleetRegressor(likelihood="robust", robust_c=2.5)
    p = m.get_params()
    assert p["likelihood"] == "robust" and p["robust_c"] == 2.5
    assert coolgp.FleetRegressor(**p).get_params() == p
    d = coolgp.FleetRegressor().get_params()
    assert d["likelihood"] is None and d["robust_c"] is None  # gaussian
    # scikit-learn's clone protocol: same settings, unfitted (sklearn.base.clone calls it).
    x, y = field(False)
    m.fit(x[:200], y[:200])
    c = m.__sklearn_clone__()
    assert c.get_params() == p and c.n_agents_ is None and m.n_agents_ == 4
