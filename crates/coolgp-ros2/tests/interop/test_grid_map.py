"""`--ros2-map-format grid_map` over rmw_zenoh: the node's map, as published on the zenoh key
rmw_zenoh would use, decoded by rosbags (grid_map_msgs registered from grid_map's own .msg
text, conftest.py) into a grid_map_msgs/msg/GridMap whose layers `mean` and `variance`, read
at grid_map's cell positions (grid_map_core getPositionFromIndex, column-major storage), equal
`coolgp query --agent` at those points; the key's RIHS01 hash equals rosbags'. An unequally
spaced grid is refused at start-up, naming both spacings."""
import json
import math
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import free_port, grid_csv, run, stop, wait_for

pytest.importorskip("zenoh")

# latitude spans x (4 points), longitude y (3 points), both spaced 0.0002.
GRID = "latitude=48:48.0006:4,longitude=11:11.0004:3"
LATS = [48 + 0.0006 * k / 3 for k in range(4)]
LONS = [11 + 0.0004 * k / 2 for k in range(3)]
TYPE = "grid_map_msgs/msg/GridMap"


def rows_csv(path, n=40):
    path.write_text("latitude,longitude,temperature\n" + "".join(
        f"{48 + 1.5e-5 * k!r},{11 + 1e-5 * (k % 7)!r},{21.0 + 0.2 * math.cos(k / 4)!r}\n"
        for k in range(n)))
    return path


def node_args(port, fleet, rows, *extra):
    return ["node", "--id", "1", "--fleet", fleet, "--inducing", "12", "--batch", "10",
            "--round-ms", "50", "--listen", f"tcp/127.0.0.1:{port}", "--data", rows,
            "--target", "temperature", "--inputs", "latitude,longitude", "--local-memory", "0",
            *extra]


def cell_positions(m):
    """grid_map's getPositionFromIndex for every cell of the (column-major) layer data:
    position = centre + length / 2 - resolution / 2 - index * resolution."""
    info = m.info
    arr = m.data[0]
    dims = {d.label: d for d in arr.layout.dim}
    rows, cols = dims["row_index"].size, dims["column_index"].size
    out = []
    for k in range(rows * cols):
        i, j = k % rows, k // rows
        x = info.pose.position.x + 0.5 * info.length_x - 0.5 * info.resolution - i * info.resolution
        y = info.pose.position.y + 0.5 * info.length_y - 0.5 * info.resolution - j * info.resolution
        out.append((x, y))
    return rows, cols, out


def test_the_grid_map_decodes_to_the_query_answers(coolgp_bin, tmp_path, router, typestore):
    import zenoh

    port, fleet = free_port(), f"gm{os.getpid()}"
    node = subprocess.Popen(
        [coolgp_bin, *node_args(port, fleet, rows_csv(tmp_path / "rows.csv"),
                                "--ros2", "zenoh", "--ros2-connect", router, "--ros2-map", GRID,
                                "--ros2-map-format", "grid_map", "--ros2-map-every", "0.5")],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node.log", "w"))
    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", json.dumps([router]))
    session = zenoh.open(conf)
    got, lock = [], threading.Lock()

    def on_sample(s):
        with lock:
            got.append((str(s.key_expr), bytes(s.payload.to_bytes())))

    sub = session.declare_subscriber("0/coolgp/map/**", on_sample)
    try:
        wait_for(lambda s: s["points"] == 40 and s.get("ros2", {}).get("maps", 0) >= 1,
                 "40 points and a map", coolgp_bin, port, fleet)
        q = grid_csv(tmp_path / "grid.csv", LATS, LONS)  # latitude fastest
        same, detail = False, None
        for attempt in range(6):
            time.sleep(1.2)
            with lock:
                key, payload = got[-1]
            _, ans, _ = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port}", "--fleet",
                             fleet, "--agent", "1", "--input", q])
            answers = [list(map(float, l.split(","))) for l in ans.splitlines()[1:]]
            m = typestore.deserialize_cdr(payload, TYPE)
            rows, cols, pos = cell_positions(m)
            assert (rows, cols) == (4, 3)
            assert list(m.layers) == ["mean", "variance"] and list(m.basic_layers) == []
            mean, var = (m.data[m.layers.index(l)].data for l in ("mean", "variance"))
            assert len(mean) == len(var) == len(answers) == 12
            same = True
            for k, (x, y) in enumerate(pos):
                # The grid point at grid_map's position of cell k.
                ix = min(range(4), key=lambda a: abs(LATS[a] - x))
                iy = min(range(3), key=lambda b: abs(LONS[b] - y))
                assert abs(LATS[ix] - x) < 1e-9 and abs(LONS[iy] - y) < 1e-9, (k, x, y)
                want_mean, want_var, _ = answers[iy * 4 + ix]
                ok = (math.isclose(mean[k], want_mean, rel_tol=2e-7)
                      and math.isclose(var[k], want_var, rel_tol=2e-7))
                if not ok:
                    same, detail = False, (k, mean[k], want_mean, var[k], want_var)
            if same:
                break
        assert same, detail
        # Cell (0, 0) is the largest latitude and longitude, as in grid_map.
        assert pos[0] == pytest.approx((LATS[-1], LONS[-1]), abs=1e-9)
        assert (m.info.resolution, m.info.length_x, m.info.length_y) == pytest.approx(
            (0.0002, 0.0008, 0.0006), rel=1e-9)
        assert (m.outer_start_index, m.inner_start_index) == (0, 0)
        assert m.header.frame_id == "map" and m.info.pose.orientation.w == 1.0
        dims = [(d.label, d.size, d.stride) for d in m.data[0].layout.dim]
        assert dims == [("column_index", 3, 12), ("row_index", 4, 4)]

        # The key: rmw_zenoh's <domain>/<topic>/<DDS type>/<RIHS01 hash>, the hash rosbags'.
        parts = key.split("/")
        assert parts[:3] == ["0", "coolgp", "map"], key
        assert parts[3] == "grid_map_msgs::msg::dds_::GridMap_", key
        assert parts[4] == typestore.hash_rihs01(TYPE), key
    finally:
        sub.undeclare()
        session.close()
        stop(node)


def test_unequal_spacings_are_refused_at_start_up(coolgp_bin, tmp_path):
    port, fleet = free_port(), f"gmx{os.getpid()}"
    code, out, err = run([coolgp_bin, *node_args(
        port, fleet, rows_csv(tmp_path / "rows.csv"), "--ros2", "zenoh",
        "--ros2-map", "latitude=48:48.0006:4,longitude=11:11.0004:5",
        "--ros2-map-format", "grid_map")], check=False, timeout=60)
    assert code != 0, (out, err)
    assert "equal spacings" in err and "`latitude`" in err and "`longitude`" in err, err
    assert "48:48.0006:4" in err and "11:11.0004:5" in err, err


RCLPY_GRAPH = """
import json, sys, time, rclpy
rclpy.init()
n = rclpy.create_node("gm_graph_viewer")
end, pubs = time.time() + 30, []
while time.time() < end:
    try:
        pubs = n.get_publisher_names_and_types_by_node("coolgp_1", "/")
    except Exception:
        pubs = []
    if any(t == "/coolgp/map" for t, _ in pubs):
        break
    time.sleep(0.2)
print(json.dumps([[t, list(ty)] for t, ty in pubs]), flush=True)
n.destroy_node(); rclpy.shutdown()
"""


def test_over_dds_the_map_publisher_has_the_grid_map_type(coolgp_bin, tmp_path):
    """Over DDS (no grid_map_msgs for rclpy, so no decoding): rclpy's graph shows the node's
    map publisher with type grid_map_msgs/msg/GridMap, and the node publishes maps without
    a publishing error."""
    pytest.importorskip("rclpy")
    domain = 10 + (os.getpid() + 11) % 200
    env = {**os.environ, "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", "ROS_DOMAIN_ID": str(domain),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    port, fleet = free_port(), f"gmd{os.getpid()}"
    log = tmp_path / "node.log"
    node = subprocess.Popen(
        [coolgp_bin, *node_args(port, fleet, rows_csv(tmp_path / "rows.csv"), "--ros2", "dds",
                                "--ros2-localhost", "--ros2-domain", str(domain), "--ros2-map",
                                GRID, "--ros2-map-format", "grid_map", "--ros2-map-every", "0.3")],
        stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env)
    try:
        p = subprocess.run([sys.executable, "-c", RCLPY_GRAPH], capture_output=True, text=True,
                           timeout=90, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        pubs = dict((t, ty) for t, ty in json.loads(p.stdout.strip().splitlines()[-1]))
        assert pubs.get("/coolgp/map") == [TYPE], pubs
        wait_for(lambda s: s.get("ros2", {}).get("maps", 0) >= 3, "three maps", coolgp_bin,
                 port, fleet)
        assert "map failed" not in log.read_text(), log.read_text()[-2000:]
    finally:
        stop(node)
