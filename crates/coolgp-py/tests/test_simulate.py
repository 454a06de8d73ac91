"""coolgp.simulate: the command line's flags as keywords, summary.json as a dict."""
import json

import pytest

import coolgp
from conftest import run

FLAGS = dict(dataset="synthetic", agents=4, inducing=12, max_train=1600, max_test=400,
             no_baselines=True, topology="path", seed=3)
TIMINGS = {"wall_s", "phases", "peak_rss_mb"}


def cli_flags(kw):
    out = []
    for k, v in kw.items():
        flag = "--" + k.replace("_", "-")
        out += [flag] if v is True else [flag, str(v)]
    return out


def test_summary_fields():
    s = coolgp.simulate(**FLAGS, quiet=True)
    assert s["agents"] == 4 and s["inducing"] == 12 and s["points"] == 1600
    assert s["topology"] == "path" and s["seed"] == 3 and s["rmse_ddtc"] is None
    assert 0 < s["rmse_post"] < s["rmse_constant"]
    assert s["fusion_max_rel_err"] < 1e-9  # tree fusion is exact
    assert s["dataset"] == "synthetic"


def test_same_numbers_as_the_command_line(coolgp_bin, tmp_path):
    py = coolgp.simulate(**FLAGS, out=tmp_path / "py")
    run([coolgp_bin, "simulate", *cli_flags(FLAGS), "--quiet", "--out", str(tmp_path / "cli")])
    cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    written = json.loads((tmp_path / "py" / "summary.json").read_text())
    assert written == py
    for k in sorted(set(cli) | set(py)):
        if k not in TIMINGS:
            assert py.get(k) == cli.get(k), k


def test_config_file(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('dataset = "synthetic"\nagents = 3\ninducing = 10\nmax-train = 900\nno-baselines = true\n')
    s = coolgp.simulate(config=cfg, agents=2, no_central=True)  # keywords win over the file
    assert (s["agents"], s["inducing"], s["rmse_central"]) == (2, 10, None)
    direct = coolgp.simulate(dataset="synthetic", agents=2, inducing=10, max_train=900,
                             no_baselines=True, no_central=True)
    assert {k: v for k, v in s.items() if k not in TIMINGS} == {
        k: v for k, v in direct.items() if k not in TIMINGS}


def test_numpy_scalars_and_paths_are_accepted(tmp_path):
    import numpy as np

    s = coolgp.simulate(**{**FLAGS, "agents": np.int64(4), "max_train": np.uint32(1600)},
                        out=tmp_path / "o")
    assert s["agents"] == 4 and (tmp_path / "o" / "summary.json").is_file()


def test_bad_keywords():
    with pytest.raises(TypeError, match="unknown keyword `agnts`.*`agents`"):
        coolgp.simulate(agnts=3)
    with pytest.raises(ValueError, match="topology"):
        coolgp.simulate(**{**FLAGS, "topology": "moebius"})
    with pytest.raises(ValueError, match="invalid type"):
        coolgp.simulate(agents="many")
    with pytest.raises(ValueError):
        coolgp.simulate(dataset="no-such-dataset")
    with pytest.raises(ValueError, match="both"):
        coolgp.simulate(projection="both")
    with pytest.raises(TypeError, match="expected a bool"):
        coolgp.simulate(agents=object())


def test_sizes_beyond_the_machine_are_refused_before_the_run():
    # One 100000 × 100000 matrix is 80 GB per agent: refused at once, naming the memory,
    # instead of running until the machine kills it.
    with pytest.raises(ValueError, match=r"--inducing 100000 needs 160 GB for one m × m matrix "
                                         r"per agent \(2 agents × m² × 8 bytes\); this machine has"):
        coolgp.simulate(dataset="synthetic", agents=2, inducing=100_000, max_train=400)


def test_inputs_as_a_list_or_a_comma_separated_string():
    # A built-in set's columns, chosen as the command line's --inputs lon,lat does: a list of
    # names and the comma-separated string give the same run, and it is not the 4-input one.
    kw = dict(dataset="wind", agents=2, inducing=10, max_train=400, max_test=200,
              no_baselines=True, no_central=True, local_memory=0)
    listed = coolgp.simulate(**kw, inputs=["lon", "lat"])
    joined = coolgp.simulate(**kw, inputs="lon,lat")
    every = coolgp.simulate(**kw)
    strip = lambda s: {k: v for k, v in s.items() if k not in TIMINGS}  # noqa: E731
    assert strip(listed) == strip(joined)
    assert listed["fingerprint"] != every["fingerprint"]
    with pytest.raises(ValueError, match="foo"):
        coolgp.simulate(**kw, inputs=["lon", "foo"])
    with pytest.raises(ValueError, match="--data"):
        coolgp.simulate(dataset="wind", target="value")
