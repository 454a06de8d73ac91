"""Shared pieces of the ROS 2 interop tests: the coolgp binary, rosbags' type store and a
writer of NavSatFix + Temperature recordings (scripts/ci_ros2.sh runs these in CI)."""
import json
import math
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent

ROOT = pathlib.Path(__file__).resolve().parents[4]


@pytest.fixture(scope="session")
def coolgp_bin():
    """$COOLGP, else target/release/coolgp."""
    target = os.environ.get("CARGO_TARGET_DIR") or ROOT / "target"
    path = pathlib.Path(os.environ.get("COOLGP") or pathlib.Path(target) / "release" / "coolgp")
    if not path.is_file():
        pytest.fail(f"{path} not found: build it with `cargo build --release -p coolgp-cli`")
    return path


def run(args, check=True, timeout=300):
    """Runs a command; returns (code, stdout, stderr)."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.returncode, p.stdout, p.stderr


# grid_map_msgs as ANYbotics/grid_map's humble (and jazzy) branch defines them, comments left
# out (grid_map_msgs/msg/*.msg here): rosbags' Jazzy store does not have them, and
# grid_map_msgs/build.sh generates them for rclpy.
GRID_MAP_MSGS = {f"grid_map_msgs/msg/{f.stem}": f.read_text()
                 for f in sorted((HERE / "grid_map_msgs" / "msg").glob("*.msg"))}


@pytest.fixture(scope="session")
def typestore():
    """rosbags' ROS 2 Jazzy types, and grid_map_msgs registered from their .msg text."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    types = {}
    for name, text in GRID_MAP_MSGS.items():
        types.update(get_types_from_msg(text, name))
    ts.register(types)
    return ts


def field(x, y, t):
    """The field the robot measures: smooth in space, slow in time."""
    return 20.0 + 3.0 * math.sin(x / 40.0) * math.cos(y / 55.0) + 0.002 * t


def survey(n, dt_ns=100_000_000, lag_ns=3_000_000, t0_ns=1_700_000_000_000_000_000):
    """n fixes and n temperatures along a lawnmower path: (stamp_ns, lat, lon) and
    (stamp_ns, temperature), the sensor `lag_ns` after each fix, with deterministic noise."""
    fixes, temps = [], []
    for k in range(n):
        t = t0_ns + k * dt_ns
        lane, pos = divmod(k, 50)
        lat = 48.0 + 0.0004 * lane
        lon = 11.0 + 0.0002 * (pos if lane % 2 == 0 else 49 - pos)
        noise = 0.05 * math.sin(12.9898 * k) 
        fixes.append((t, lat, lon))
        temps.append((t + lag_ns, field((lat - 48.0) * 1e4, (lon - 11.0) * 1e4, k * 0.1) + noise))
    return fixes, temps


def stamp(ts, t_ns):
    Time = ts.types["builtin_interfaces/msg/Time"]
    Header = ts.types["std_msgs/msg/Header"]
    return Header(stamp=Time(sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000), frame_id="map")


def navsatfix(ts, t_ns, lat, lon):
    import numpy as np

    T = ts.types
    return T["sensor_msgs/msg/NavSatFix"](
        header=stamp(ts, t_ns),
        status=T["sensor_msgs/msg/NavSatStatus"](status=0, service=1),
        latitude=lat, longitude=lon, altitude=500.0,
        position_covariance=np.zeros(9, dtype=np.float64), position_covariance_type=0)


def temperature(ts, t_ns, value):
    return ts.types["sensor_msgs/msg/Temperature"](header=stamp(ts, t_ns), temperature=value, variance=0.01)


def write_bag(ts, path, fixes, temps, storage="mcap", compression=None, extra=None,
              little_endian=True, representation=None):
    """A rosbag2 bag written by rosbags: /fix (NavSatFix) and /temp (Temperature), in log-time
    order, serialized by rosbags in the byte order asked (`little_endian`); `representation`
    (2 bytes) replaces each message's representation identifier; `extra(writer)` may add
    more."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    w = Writer(path, version=9, storage_plugin=plugin)
    if compression:
        from rosbags.rosbag2 import CompressionFormat, CompressionMode

        w.set_compression(CompressionMode[compression.upper()], CompressionFormat.ZSTD)
    with w:
        fix = w.add_connection("/fix", "sensor_msgs/msg/NavSatFix", typestore=ts)
        tmp = w.add_connection("/temp", "sensor_msgs/msg/Temperature", typestore=ts)
        events = [(t, 0, (t, la, lo)) for t, la, lo in fixes] + [(t, 1, (t, v)) for t, v in temps]

        def cdr(msg, typename):
            data = bytes(ts.serialize_cdr(msg, typename, little_endian=little_endian))
            assert data[:2] == (b"\x00\x01" if little_endian else b"\x00\x00"), data[:4]
            return representation + data[2:] if representation else data

        for t, kind, e in sorted(events, key=lambda e: (e[0], e[1])):
            if kind == 0:
                w.write(fix, t, cdr(navsatfix(ts, *e), "sensor_msgs/msg/NavSatFix"))
            else:
                w.write(tmp, t, cdr(temperature(ts, *e), "sensor_msgs/msg/Temperature"))
        if extra:
            extra(w)
    return path


def zenoh_client(router):
    """A zenoh session in client mode, connected to `router` only."""
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", json.dumps([router]))
    return zenoh.open(conf)


def get_parameters_types(ts):
    """rcl_interfaces/srv/GetParameters' request and response registered in `ts` (rosbags'
    Jazzy store lacks them); returns their names in the store."""
    from rosbags.typesys import get_types_from_msg

    types = get_types_from_msg("string[] names", "rcl_interfaces/srv/GetParameters_Request")
    types.update(get_types_from_msg("rcl_interfaces/ParameterValue[] values",
                                    "rcl_interfaces/srv/GetParameters_Response"))
    ts.register(types)
    req_t, resp_t = list(types)  # rosbags names them rcl_interfaces/srv/msg/...
    return req_t, resp_t


def answers(resp):
    """A GetParameters response as [{type, values, string}] per point."""
    return [{"type": int(v.type), "values": [float(x) for x in v.double_array_value],
             "string": v.string_value} for v in resp.values]


def cloud_points(m):
    """A rosbags PointCloud2's points as dicts of floats, in storage order."""
    import numpy as np

    formats = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}
    end = ">" if m.is_bigendian else "<"
    dt = np.dtype({"names": [f.name for f in m.fields], "offsets": [f.offset for f in m.fields],
                   "formats": [end + formats[f.datatype] for f in m.fields],
                   "itemsize": m.point_step})
    arr = np.frombuffer(bytes(m.data), dtype=dt, count=m.width * m.height)
    return [{k: float(p[k]) for k in dt.names} for p in arr]


def free_port():
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def router(tmp_path):
    """A zenoh router (router.py) on a free loopback port, as rmw_zenoh's `rmw_zenohd`."""
    ep = f"tcp/127.0.0.1:{free_port()}"
    p = subprocess.Popen([sys.executable, HERE / "router.py", ep], stdout=subprocess.PIPE,
                         stderr=open(tmp_path / "router.log", "w"), text=True)
    assert "listening" in p.stdout.readline()
    yield ep
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)


def status(coolgp_bin, port, fleet):
    """Agent 1's status from the node listening on `port`."""
    _, out, _ = run([coolgp_bin, "status", "--connect", f"tcp/127.0.0.1:{port}", "--fleet", fleet,
                     "--agent", "1", "--timeout-ms", "5000"], timeout=30)
    return json.loads(out)


def wait_for(pred, what, coolgp_bin, port, fleet, timeout=60, every=0.3):
    """Agent 1's status once `pred` holds for it; fails naming `what` after `timeout` s."""
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        try:
            last = status(coolgp_bin, port, fleet)
            if pred(last):
                return last
        except AssertionError:
            pass
        time.sleep(every)
    raise AssertionError(f"{what} never happened: {last}")


def stop(p):
    """Stops a process: SIGTERM, then SIGKILL after 20 s."""
    p.terminate()
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def grid_csv(path, lats, lons):
    """The map's grid points as a query CSV, row-major with latitude fastest."""
    path.write_text("latitude,longitude\n" + "".join(
        f"{la!r},{lo!r}\n" for lo in lons for la in lats))
    return path
