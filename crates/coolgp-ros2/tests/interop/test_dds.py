"""`coolgp node --ros2 dds` against the real ROS 2: rclpy 9 on Fast DDS (`rmw_fastrtps_cpp`,
from the ros-rclpy wheels) publishes NavSatFix + Temperature; the coolgp node learns every
pair; rclpy receives its PointCloud2 map and decodes means and variances equal to `coolgp
query` at the grid points; rclpy's graph API shows the node, its subscriptions and publishers.
Discovery stays on loopback (`--ros2-localhost`, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)."""
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import free_port, grid_csv, run, status, stop, wait_for

HERE = pathlib.Path(__file__).resolve().parent
GRID = "latitude=48:48.0006:4,longitude=11:11.00006:3"

try:
    import rclpy  # noqa: F401
    HAVE_RCLPY = True
except ImportError:
    HAVE_RCLPY = False
if not HAVE_RCLPY and os.environ.get("COOLGP_REQUIRE_RCLPY") == "1":
    raise RuntimeError("rclpy is required here (COOLGP_REQUIRE_RCLPY=1) but not installed")
pytestmark = pytest.mark.skipif(not HAVE_RCLPY, reason="rclpy (ros-rclpy wheels) not installed")


def test_rclpy_and_a_coolgp_node_over_dds(coolgp_bin, tmp_path):
    domain = 10 + os.getpid() % 200
    env = {**os.environ, "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", "ROS_DOMAIN_ID": str(domain),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    port = free_port()
    fleet = f"dds{os.getpid()}"
    node = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--fleet", fleet, "--inducing", "12", "--batch", "10",
         "--round-ms", "50", "--listen", f"tcp/127.0.0.1:{port}", "--ros2", "dds",
         "--ros2-localhost", "--ros2-domain", str(domain),
         "--ros2-input", "/fix:sensor_msgs/msg/NavSatFix:latitude,longitude",
         "--ros2-target", "/temp:sensor_msgs/msg/Temperature:temperature",
         "--ros2-tolerance", "0.02", "--ros2-map", GRID, "--ros2-map-every", "0.3",
         "--local-memory", "0"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node.log", "w"), env=env)
    try:
        p = subprocess.run([sys.executable, HERE / "rclpy_peer.py", "--n", "60", "--settle", "2"],
                           capture_output=True, text=True, timeout=180, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        peer = json.loads(p.stdout.strip().splitlines()[-1])
        assert peer["matched"], "rclpy's publishers never matched the coolgp node's subscriptions"
        _, out, _ = run([coolgp_bin, "status", "--connect", f"tcp/127.0.0.1:{port}", "--fleet",
                         fleet, "--agent", "1", "--timeout-ms", "5000"], timeout=30)
        st = json.loads(out)
        r = st["ros2"]
        assert (st["points"], r["rows"], r["messages"], r["middleware"]) == (60, 60, 120, "dds"), r
        assert r["bad_cdr"] == r["non_finite"] == 0

        # The map rclpy received equals `coolgp query` at the grid points.
        cloud = peer["map"]
        assert cloud and (cloud["width"], cloud["height"]) == (4, 3), peer
        assert cloud["fields"] == ["x", "y", "z", "mean", "variance"]
        lats = [48 + 0.0006 * k / 3 for k in range(4)]
        lons = [11 + 0.00006 * k / 2 for k in range(3)]
        q = grid_csv(tmp_path / "grid.csv", lats, lons)
        _, ans, _ = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port}", "--fleet",
                         fleet, "--agent", "1", "--input", q])
        rows = [list(map(float, l.split(","))) for l in ans.splitlines()[1:]]
        for pt, (mean, var_f, _) in zip(cloud["points"], rows, strict=True):
            assert math.isclose(pt["mean"], mean, rel_tol=1e-12), (pt, mean)
            assert math.isclose(pt["variance"], var_f, rel_tol=1e-12), (pt, var_f)

        # Its health, decoded by rclpy.
        d = peer["diagnostics"]
        assert d and d[0]["values"]["points"] == "60" and d[0]["hardware_id"] == "1", d

        # rclpy's graph API: the node and its endpoints with their types.
        g = peer["graph"]
        assert ["coolgp_1", "/"] in g["nodes"], g["nodes"]
        assert g["topics"]["/coolgp/map"] == ["sensor_msgs/msg/PointCloud2"]
        assert ["/fix", ["sensor_msgs/msg/NavSatFix"]] in g["subscriptions"], g
        assert ["/temp", ["sensor_msgs/msg/Temperature"]] in g["subscriptions"], g
        assert ["/coolgp/map", ["sensor_msgs/msg/PointCloud2"]] in g["publishers"], g
        assert ["/diagnostics", ["diagnostic_msgs/msg/DiagnosticArray"]] in g["publishers"], g
    finally:
        stop(node)


@pytest.mark.parametrize("durability", ["transient-local", "volatile"])
def test_a_late_transient_local_subscriber_gets_the_latched_map(coolgp_bin, tmp_path, durability):
    """`--ros2-map-durability transient-local`: an rclpy subscriber with TRANSIENT_LOCAL QoS
    created after the node published its map (maps every 15 s, so no new one comes while it
    waits) gets that map at once (Fast DDS also hands it to a late volatile subscriber of a
    transient-local writer). With the default (volatile) publisher neither gets anything:
    the transient-local subscriber does not match, the volatile one gets no history."""
    domain = 10 + (os.getpid() + 7 + len(durability)) % 200
    env = {**os.environ, "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp", "ROS_DOMAIN_ID": str(domain),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    rows = tmp_path / "rows.csv"
    rows.write_text("latitude,longitude,temperature\n" + "".join(
        f"{48 + 1e-5 * k!r},{11 + 1e-5 * (k % 7)!r},{21.0 + 0.2 * math.cos(k / 4)!r}\n"
        for k in range(40)))
    port, fleet = free_port(), f"latch{os.getpid()}{len(durability)}"
    flags = [] if durability == "volatile" else ["--ros2-map-durability", durability]
    node = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--fleet", fleet, "--inducing", "12", "--batch", "10",
         "--round-ms", "50", "--listen", f"tcp/127.0.0.1:{port}", "--data", rows,
         "--target", "temperature", "--inputs", "latitude,longitude", "--local-memory", "0",
         "--ros2", "dds", "--ros2-localhost", "--ros2-domain", str(domain),
         "--ros2-map", GRID, "--ros2-map-every", "15", *flags],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node.log", "w"), env=env)
    viewer = subprocess.Popen([sys.executable, HERE / "rclpy_latched.py", "--wait", "4"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert viewer.stdout.readline().strip() == "ready"
        maps = lambda s: s.get("ros2", {}).get("maps", 0)
        before = wait_for(lambda s: maps(s) >= 1, "the first map", coolgp_bin, port, fleet,
                          timeout=60, every=0.2)
        viewer.stdin.write("go\n")
        viewer.stdin.flush()
        got = json.loads(viewer.stdout.readline())
        assert viewer.wait(timeout=30) == 0
        after = status(coolgp_bin, port, fleet)
        assert maps(after) == maps(before), "a map was published while the viewer waited"
        if durability == "transient-local":
            tl = got["transient_local"]
            assert len(tl) == 1, got
            assert (tl[0]["width"], tl[0]["height"]) == (4, 3) and tl[0]["after_s"] < 3.0, got
            assert len(got["volatile"]) == 1, got
        else:
            assert got["transient_local"] == got["volatile"] == [], got
    finally:
        viewer.kill()
        stop(node)
