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


# share/service_msgs/msg/ServiceEventInfo.json of the ros-service-msgs wheel (rosidl's own).
SERVICE_EVENT_INFO_ROSIDL = "RIHS01_41bcbbe07a75c9b52bc96bfd5c24d7f0fc0a08c0cb7921b3373c5732345a6f45"


def test_type_hashes_equal_rosbags(coolgp_bin, typestore):
    _, out, _ = run([coolgp_bin, "ros2", "types", "--json"])
    types = [json.loads(line) for line in out.splitlines()]
    assert len([t for t in types if t["role"] == "input"]) == 11
    # The point-query service (test_query_service.py checks its hash against rosidl's).
    assert [t["name"] for t in types if t["role"] == "service"] == ["rcl_interfaces/srv/GetParameters"]
    for t in [t for t in types if t["role"] != "service"]:
        if t["name"] == "service_msgs/msg/ServiceEventInfo":
            # rosbags hashes its `char[16] client_gid` as char (type id 13); rosidl as uint8,
            # what ROS 2 uses: the hash the ros-service-msgs wheel ships is ours.
            assert t["hash"] == SERVICE_EVENT_INFO_ROSIDL
            continue
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


def test_a_big_endian_recording_learns_the_rows_of_the_little_endian_one(coolgp_bin, typestore,
                                                                         tmp_path):
    """rosbags serializes every message big-endian (CDR_BE, representation 0x0000): coolgp
    learns exactly what it learns from the same recording in little endian."""
    fixes, temps = survey(600)
    le = write_bag(typestore, tmp_path / "le", fixes, temps)
    be = write_bag(typestore, tmp_path / "be", fixes, temps, little_endian=False)
    assert sorted(le.glob("*.mcap"))[0].read_bytes() != sorted(be.glob("*.mcap"))[0].read_bytes()
    common = ["--ros2-input", INPUT, "--ros2-target", TARGET]
    from_le = simulate(coolgp_bin, tmp_path / "out_le", "--data", le, *common)
    from_be = simulate(coolgp_bin, tmp_path / "out_be", "--data", be, *common)
    assert from_be["points"] == from_le["points"] > 500
    for k in sorted(set(from_le) | set(from_be)):
        if k not in TIMINGS:
            assert from_be.get(k) == from_le.get(k), k
    _, out, _ = run([coolgp_bin, "ros2", "bag", be])
    assert any(l.startswith("/fix") and " 600 " in l and "yes" in l for l in out.splitlines()), out


def test_a_recording_in_xcdr2_is_refused_naming_what_is_read(coolgp_bin, typestore, tmp_path):
    fixes, temps = survey(50)
    for rep, name in [(b"\x00\x07", "0x0007 (CDR2_LE (XCDR2))"), (b"\x00\x03", "0x0003 (PL_CDR_LE)")]:
        bag = write_bag(typestore, tmp_path / f"x{rep[1]}", fixes, temps, representation=rep)
        code, _, err = run([coolgp_bin, "simulate", "--data", bag, "--ros2-input", INPUT,
                            "--ros2-target", TARGET, "--quiet"], check=False)
        assert code != 0 and name in err and "CDR_LE (0x0001) or CDR_BE (0x0000)" in err, err


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


def test_a_recording_of_many_robots_gives_one_agent_per_robot(coolgp_bin, typestore, tmp_path):
    """/*/fix and /*/temp: every robot's topics, paired within each robot's namespace, one
    agent per robot; the same as a CSV with a robot column routed by --agent-by."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from conftest import navsatfix, temperature

    robots = ["alpha", "bravo", "charlie"]
    per = {r: survey(150, t0_ns=1_700_000_000_000_000_000 + 17_000_000 * i)
           for i, r in enumerate(robots)}
    bag = tmp_path / "fleet"
    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conns = {r: (w.add_connection(f"/{r}/fix", "sensor_msgs/msg/NavSatFix", typestore=typestore),
                     w.add_connection(f"/{r}/temp", "sensor_msgs/msg/Temperature", typestore=typestore))
                 for r in robots}
        events = []
        for r in robots:
            fixes, temps = per[r]
            events += [(t, r, 0, (t, la, lo)) for t, la, lo in fixes]
            events += [(t, r, 1, (t, v)) for t, v in temps]
        for t, r, kind, e in sorted(events, key=lambda e: (e[0], e[1], e[2])):
            if kind == 0:
                w.write(conns[r][0], t, typestore.serialize_cdr(
                    navsatfix(typestore, *e), "sensor_msgs/msg/NavSatFix"))
            else:
                w.write(conns[r][1], t, typestore.serialize_cdr(
                    temperature(typestore, *e), "sensor_msgs/msg/Temperature"))
    # Robots in the order of their first message (alpha's fix is first), each in its order.
    csv = tmp_path / "fleet.csv"
    with csv.open("w") as f:
        f.write("robot,latitude,longitude,temperature\n")
        for r in robots:
            fixes, temps = per[r]
            for (_, lat, lon), (_, v) in zip(fixes, temps):
                f.write(f"{r},{lat!r},{lon!r},{v!r}\n")
    flags = ["--inducing", "16", "--batch", "20", "--seed", "3", "--no-baselines", "--quiet"]
    run([coolgp_bin, "simulate", "--data", bag, "--ros2-input",
         "/*/fix:sensor_msgs/msg/NavSatFix:latitude,longitude", "--ros2-target",
         "/*/temp:sensor_msgs/msg/Temperature:temperature", *flags, "--out", tmp_path / "b"])
    run([coolgp_bin, "simulate", "--data", csv, "--target", "temperature", "--inputs",
         "latitude,longitude", "--agent-by", "robot", *flags, "--out", tmp_path / "c"])
    from_bag = json.loads((tmp_path / "b" / "summary.json").read_text())
    from_csv = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert from_bag["agents"] == from_csv["agents"] == 3
    for k in sorted(set(from_bag) | set(from_csv)):
        if k not in TIMINGS:
            assert from_bag.get(k) == from_csv.get(k), k
