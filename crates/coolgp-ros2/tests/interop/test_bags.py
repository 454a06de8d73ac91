"""rosbag2 recordings written by rosbags (the pure-Python rosbag2 library, which we did not
write) read by coolgp: the same rows as CSV, bit for bit; the same type hashes; clear errors."""
import json

import pytest

from conftest import run, survey, write_bag

INPUT = "/fix:sensor_msgs/msg/NavSatFix:latitude,longitude"
TARGET = "/temp:sensor_msgs/msg/Temperature:temperature"
FLAGS = ["--agents", "4", "--inducing", "16", "--batch", "20", "--seed", "3",
         "--no-baselines", "--quiet"]
TIMINGS = {"wall_s", "phases", "peak_rss_mb", "dataset", "data"}


def test_type_hashes_equal_rosbags(coolgp_bin, typestore):
    _, out, _ = run([coolgp_bin, "ros2", "types", "--json"])
    types = [json.loads(line) for line in out.splitlines()]
    assert len([t for t in types if t["role"] == "input"]) == 11
    for t in types:
        assert t["hash"] == typestore.hash_rihs01(t["name"]), t["name"]
        short = t["name"].split("/")[-1]
        assert t["dds_name"] == f"{t['name'].split('/')[0]}::msg::dds_::{short}_"


def simulate(coolgp_bin, out, *data):
    run([coolgp_bin, "simulate", *data, *FLAGS, "--out", out])
    return json.loads((out / "summary.json").read_text())


@pytest.mark.parametrize("compression", [None, "message", "file"])
def test_bag_learns_exactly_what_the_csv_teaches(coolgp_bin, typestore, tmp_path, compression):
    fixes, temps = survey(600)
    bag = write_bag(typestore, tmp_path / "run", fixes, temps, compression=compression)
    csv = tmp_path / "run.csv"
    with csv.open("w") as f:
        f.write("latitude,longitude,temperature\n")
        for (_, lat, lon), (_, v) in zip(fixes, temps):
            f.write(f"{lat!r},{lon!r},{v!r}\n")
    from_bag = simulate(coolgp_bin, tmp_path / "bag", "--data", bag,
                        "--ros2-input", INPUT, "--ros2-target", TARGET)
    from_csv = simulate(coolgp_bin, tmp_path / "csv", "--data", csv,
                        "--target", "temperature", "--inputs", "latitude,longitude")
    assert from_bag["points"] == from_csv["points"] > 500
    for k in sorted(set(from_bag) | set(from_csv)):
        if k not in TIMINGS:
            assert from_bag.get(k) == from_csv.get(k), k
    assert from_bag["rmse_post"] < from_bag["rmse_constant"]


def test_an_mcap_file_alone_and_the_bag_listing(coolgp_bin, typestore, tmp_path):
    fixes, temps = survey(100)
    bag = write_bag(typestore, tmp_path / "run", fixes, temps)
    files = sorted(bag.glob("*.mcap"))
    assert len(files) == 1
    _, out, _ = run([coolgp_bin, "ros2", "bag", files[0]])
    lines = out.splitlines()
    assert any(l.startswith("/fix") and "NavSatFix" in l and " 100 " in l and "yes" in l
               for l in lines), out
    s = simulate(coolgp_bin, tmp_path / "one", "--data", files[0],
                 "--ros2-input", INPUT, "--ros2-target", TARGET)
    assert s["points"] == 90  # 100 rows, 10% held out


def test_refusals_name_the_fix(coolgp_bin, typestore, tmp_path):
    fixes, temps = survey(50)
    sqlite = write_bag(typestore, tmp_path / "sq", fixes, temps, storage="sqlite3")
    code, _, err = run([coolgp_bin, "simulate", "--data", sqlite, "--ros2-input", INPUT,
                        "--ros2-target", TARGET, "--quiet"], check=False)
    assert code != 0 and "ros2 bag convert" in err, err

    bag = write_bag(typestore, tmp_path / "ok", fixes, temps)
    for args, needle in [
        (["--ros2-input", INPUT, "--ros2-target", "/temp:std_msgs/msg/Float64:data"],
         "recorded as sensor_msgs/msg/Temperature"),
        (["--ros2-input", INPUT, "--ros2-target", "/humidity:sensor_msgs/msg/RelativeHumidity:relative_humidity"],
         "has no topic /humidity; its topics: /fix (sensor_msgs/msg/NavSatFix)"),
        (["--ros2-input", INPUT], "--ros2-target"),
        (["--ros2-input", "/fix:sensor_msgs/msg/NavSatFix:lat", "--ros2-target", TARGET], "latitude"),
        (["--ros2-input", INPUT, "--ros2-target", TARGET, "--target", "t"], "not --target"),
        (["--ros2-input", INPUT, "--ros2-target", TARGET, "--ros2-tolerance", "0.001"],
         "gave no row"),
    ]:
        code, _, err = run([coolgp_bin, "simulate", "--data", bag, *args, "--quiet"], check=False)
        assert code != 0 and needle in err, (args, err)
