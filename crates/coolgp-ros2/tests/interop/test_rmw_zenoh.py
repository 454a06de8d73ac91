"""`coolgp node --ros2 zenoh` against an rmw_zenoh implementation we did not write
(zenoh-ros2-sdk, with rosbags' types, driven by peer.py): the node learns from the peer's live
NavSatFix + Temperature topics, its PointCloud2 map decodes to what `coolgp query` answers at the
grid points, the peer's view of the ROS 2 graph shows the node and its topics, and bad messages
from a publisher of our own (built from rmw_zenoh's design document) are counted, not learned."""
import json
import math
import os
import pathlib
import subprocess
import sys
import time

import pytest

from conftest import free_port, grid_csv, run, status, stop, wait_for

pytest.importorskip("zenoh")
pytest.importorskip("zenoh_ros2_sdk")

HERE = pathlib.Path(__file__).resolve().parent
GRID = "latitude=48:48.0006:4,longitude=11:11.0004:3"


def peer(router, *args, timeout=60):
    return run([sys.executable, HERE / "peer.py", "-e", router, "--mode", "client", *args],
               timeout=timeout)[1]


def start_node(coolgp_bin, tmp_path, router, *extra):
    port = free_port()
    fleet = f"ros{os.getpid()}{port}"
    p = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--fleet", fleet, "--inducing", "12", "--batch", "10",
         "--round-ms", "50", "--listen", f"tcp/127.0.0.1:{port}", "--ros2", "zenoh",
         "--ros2-connect", router, *extra],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node.log", "w"))
    return p, port, fleet


def test_node_learns_maps_and_shows_in_the_graph(coolgp_bin, tmp_path, router):
    node, port, fleet = start_node(
        coolgp_bin, tmp_path, router, "--ros2-namespace", "/robot1",
        "--ros2-input", "fix:sensor_msgs/msg/NavSatFix:latitude,longitude",
        "--ros2-target", "temp:sensor_msgs/msg/Temperature:temperature",
        "--ros2-tolerance", "0.02", "--ros2-map", GRID, "--ros2-map-every", "0.3",
        "--local-memory", "0")
    try:
        out = peer(router, "--node", "gps", "pub", "-n", "60", "--rate", "20", "--wait-sub", "15",
                   "--fix", "/robot1/fix", "--temp", "/robot1/temp")
        assert '"subscriber_seen": true' in out
        st = wait_for(lambda s: s["points"] == 60, "60 points", coolgp_bin, port, fleet)
        r = st["ros2"]
        assert (r["node"], r["messages"], r["rows"]) == ("/robot1/coolgp_1", 120, 60), r
        assert dict(r["per_topic"]) == {"robot1/fix": 60, "robot1/temp": 60}
        assert r["bad_cdr"] == r["wrong_type"] == r["rows_dropped"] == 0

        # The map, decoded by the peer, equals `coolgp query` at the grid points.
        time.sleep(1.0)
        lines = peer(router, "--node", "viewer", "sub", "--topic", "/robot1/coolgp/map",
                     "-n", "1", "--timeout", "15").splitlines()
        cloud = json.loads(lines[0])
        assert (cloud["width"], cloud["height"]) == (4, 3)
        assert cloud["fields"] == ["x", "y", "z", "mean", "variance"]
        lats = [48 + 0.0006 * k / 3 for k in range(4)]
        lons = [11 + 0.0004 * k / 2 for k in range(3)]
        q = grid_csv(tmp_path / "grid.csv", lats, lons)
        _, ans, _ = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port}", "--fleet",
                         fleet, "--agent", "1", "--input", q])
        rows = [list(map(float, l.split(","))) for l in ans.splitlines()[1:]]
        assert len(rows) == len(cloud["points"]) == 12
        for p, (mean, var_f, _) in zip(cloud["points"], rows):
            assert math.isclose(p["mean"], mean, rel_tol=1e-12), (p, mean)
            assert math.isclose(p["variance"], var_f, rel_tol=1e-12), (p, var_f)
        assert abs(cloud["points"][5]["x"] - lats[1]) < 1e-5  # float32 grid coordinates

        # The peer's view of the graph: our node, its subscriptions and publishers.
        g = json.loads(peer(router, "--node", "viewer", "graph", "--wait", "1.5"))
        assert "/robot1/coolgp_1" in [n["fqn"] for n in g["nodes"]], g["nodes"]
        t = g["topics"]
        assert "/robot1/coolgp_1" in t["/robot1/fix"]["subscribers"]
        assert "/robot1/coolgp_1" in t["/robot1/temp"]["subscribers"]
        assert t["/robot1/coolgp/map"]["types"] == ["sensor_msgs::msg::dds_::PointCloud2_"]
        assert "/robot1/coolgp_1" in t["/robot1/coolgp/map"]["publishers"]
        assert "/robot1/coolgp_1" in t["/diagnostics"]["publishers"]
        sdk = dict((name, types) for name, types in g["sdk_topic_names_and_types"])
        assert sdk["/robot1/fix"] == ["sensor_msgs/msg/NavSatFix"]

        # Its health on /diagnostics.
        d = json.loads(peer(router, "--node", "viewer", "sub", "--topic", "/diagnostics", "--type",
                            "diagnostic_msgs/msg/DiagnosticArray", "-n", "1",
                            "--timeout", "15").splitlines()[0])
        values = {kv["key"]: kv["value"] for kv in d["status"][0]["values"]}
        assert values["points"] == "60" and values["ros2_rows"] == "60", values
        assert d["status"][0]["hardware_id"] == "1"
    finally:
        stop(node)


def raw_publisher(router, typestore):
    """A publisher of our own, from rmw_zenoh's design document: key
    <domain>/<topic>/<pkg::msg::dds_::Name_>/<RIHS01 hash>, a 33-byte attachment."""
    import zenoh

    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", json.dumps([router]))
    session = zenoh.open(conf)
    seq = [0]

    def put(topic, msgtype, payload):
        pkg, _, name = msgtype.split("/")
        key = f"0/{topic}/{pkg}::msg::dds_::{name}_/{typestore.hash_rihs01(msgtype)}"
        seq[0] += 1
        att = seq[0].to_bytes(8, "little") + time.time_ns().to_bytes(8, "little") + b"\x10" + bytes(16)
        session.put(key, bytes(payload), attachment=att)

    return session, put


def test_bad_messages_are_counted_not_learned(coolgp_bin, tmp_path, router, typestore):
    from conftest import navsatfix, temperature

    node, port, fleet = start_node(
        coolgp_bin, tmp_path, router,
        "--ros2-input", "/fix:sensor_msgs/msg/NavSatFix:latitude,longitude",
        "--ros2-target", "/temp:sensor_msgs/msg/Temperature:temperature",
        "--ros2-tolerance", "0.01")
    session, put = raw_publisher(router, typestore)
    try:
        wait_for(lambda s: "ros2" in s, "the node up", coolgp_bin, port, fleet)
        time.sleep(1.0)
        ser = lambda m, t, le=True: typestore.serialize_cdr(m, t, little_endian=le)
        fix_t, temp_t = "sensor_msgs/msg/NavSatFix", "sensor_msgs/msg/Temperature"
        t0 = 1_700_000_000_000_000_000
        good = 0
        for k in range(20):
            t = t0 + k * 100_000_000
            le = k % 2 == 0  # every other pair big-endian (CDR_BE), learned alike
            put("fix", fix_t, ser(navsatfix(typestore, t, 48.0 + k * 1e-4, 11.0), fix_t, le))
            put("temp", temp_t, ser(temperature(typestore, t + 1_000_000, 20.0 + k), temp_t, le))
            good += 1
            time.sleep(0.01)
        bad_fix = ser(navsatfix(typestore, t0 + 30 * 10**8, 48.0, 11.0), fix_t)
        put("fix", fix_t, bad_fix[:20])                                  # truncated
        put("fix", fix_t, b"\x07\x07garbage")                            # not CDR
        xcdr2 = bytearray(ser(navsatfix(typestore, t0 + 30 * 10**8, 48.0, 11.0), fix_t))
        xcdr2[:2] = b"\x00\x07"
        put("fix", fix_t, bytes(xcdr2))                                  # XCDR2: refused
        put("fix", fix_t, ser(navsatfix(typestore, t0 + 31 * 10**8, float("nan"), 11.0), fix_t))
        put("fix", fix_t, ser(navsatfix(typestore, t0, 48.0, 11.0), fix_t))  # stamp backwards
        put("fix", temp_t, ser(temperature(typestore, t0 + 32 * 10**8, 1.0), temp_t))  # wrong type
        st = wait_for(lambda s: s["ros2"]["wrong_type"] == 1 and s["points"] == good,
                      "the bad messages counted", coolgp_bin, port, fleet)
        r = st["ros2"]
        assert (r["bad_cdr"], r["non_finite"], r["stamp_backwards"]) == (3, 1, 1), r
        assert r["rows"] == good and st["rows_skipped"] == 0
        log = (tmp_path / "node.log").read_text()
        assert "0x0007 (CDR2_LE (XCDR2))" in log and "CDR_BE (0x0000)" in log, log[-2000:]
        assert node.poll() is None  # still running
    finally:
        session.close()
        stop(node)


def test_the_map_is_the_fleet_query_where_memory_is_on(coolgp_bin, tmp_path, router):
    """With a local memory the map shows the fleet query: node 1 learns the peer's topics,
    node 2 its CSV rows; the map equals `coolgp query --all` at the grid points."""
    port2, fleet = free_port(), f"fm{os.getpid()}"
    rows = tmp_path / "b.csv"
    rows.write_text("latitude,longitude,temperature\n" + "".join(
        f"{48 + 1e-5 * k!r},{11 + 1e-5 * (k % 7)!r},{21.0 + 0.2 * math.cos(k / 4)!r}\n"
        for k in range(60)))
    common = ["--fleet", fleet, "--inducing", "12", "--batch", "10", "--round-ms", "50",
              "--local-memory", "60", "--local-fit", "agent"]
    n2 = subprocess.Popen(
        [coolgp_bin, "node", "--id", "2", "--neighbors", "1", *common, "--data", rows,
         "--target", "temperature", "--inputs", "latitude,longitude",
         "--listen", f"tcp/127.0.0.1:{port2}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node2.log", "w"))
    port1 = free_port()
    n1 = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--neighbors", "2", *common,
         "--listen", f"tcp/127.0.0.1:{port1}", "--connect", f"tcp/127.0.0.1:{port2}",
         "--ros2", "zenoh", "--ros2-connect", router,
         "--ros2-input", "/fix:sensor_msgs/msg/NavSatFix:latitude,longitude",
         "--ros2-target", "/temp:sensor_msgs/msg/Temperature:temperature",
         "--ros2-tolerance", "0.02", "--ros2-map", GRID, "--ros2-map-every", "0.5"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node1.log", "w"))
    try:
        peer(router, "--node", "gps", "pub", "-n", "60", "--rate", "20", "--wait-sub", "15")
        wait_for(lambda s: s["points"] == 60 and s["fleet_points"] == 120, "both nodes' rows",
                 coolgp_bin, port1, fleet)
        lats = [48 + 0.0006 * k / 3 for k in range(4)]
        lons = [11 + 0.0004 * k / 2 for k in range(3)]
        q = grid_csv(tmp_path / "grid.csv", lats, lons)
        # The models settle once both streams ended; a map computed before may differ.
        for attempt in range(5):
            time.sleep(1.5)
            cloud = json.loads(peer(router, "--node", "viewer", "sub", "--topic", "/coolgp/map",
                                    "-n", "1", "--timeout", "15").splitlines()[0])
            _, ans, err = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port1}",
                               "--fleet", fleet, "--all", "--input", q])
            rows_q = [list(map(float, l.split(","))) for l in ans.splitlines()[1:]]
            same = all(math.isclose(p["mean"], m, rel_tol=1e-9)
                       and math.isclose(p["variance"], v, rel_tol=1e-9)
                       for p, (m, v, _) in zip(cloud["points"], rows_q, strict=True))
            if same:
                break
        assert same, (cloud["points"][:3], rows_q[:3])
        assert "answers from agent(s) [1, 2]" in err, err
        own = status(coolgp_bin, port1, fleet)
        assert own["ros2"]["maps"] >= 1 and own["local_points"] > 0
    finally:
        stop(n1)
        stop(n2)


@pytest.mark.parametrize("durability", ["transient-local", "volatile"])
def test_a_late_advanced_subscriber_gets_the_latched_map(coolgp_bin, tmp_path, router, typestore,
                                                        durability):
    """`--ros2-map-durability transient-local` over rmw_zenoh: a zenoh-ext AdvancedSubscriber
    with history and late-publisher detection (what rmw_zenoh makes of a TRANSIENT_LOCAL
    subscription), declared after the node published its map (maps every 15 s), gets that map
    once, with rmw_zenoh's attachment; a plain subscriber gets nothing. With the default
    (volatile) publisher the advanced subscriber gets nothing either."""
    import zenoh
    import zenoh.ext

    rows = tmp_path / "rows.csv"
    rows.write_text("latitude,longitude,temperature\n" + "".join(
        f"{48 + 1e-5 * k!r},{11 + 1e-5 * (k % 7)!r},{21.0 + 0.2 * math.cos(k / 4)!r}\n"
        for k in range(40)))
    flags = [] if durability == "volatile" else ["--ros2-map-durability", durability]
    node, port, fleet = start_node(
        coolgp_bin, tmp_path, router, "--data", rows, "--target", "temperature",
        "--inputs", "latitude,longitude", "--local-memory", "0", "--ros2-map", GRID,
        "--ros2-map-every", "15", *flags)
    conf = zenoh.Config()
    conf.insert_json5("mode", '"client"')
    conf.insert_json5("connect/endpoints", json.dumps([router]))
    session = zenoh.open(conf)
    ty = "sensor_msgs/msg/PointCloud2"
    key = f"0/coolgp/map/sensor_msgs::msg::dds_::PointCloud2_/{typestore.hash_rihs01(ty)}"
    try:
        maps = lambda s: s.get("ros2", {}).get("maps", 0)
        before = wait_for(lambda s: maps(s) >= 1, "the first map", coolgp_bin, port, fleet,
                          timeout=60, every=0.2)
        t0 = time.time()
        latched, plain = [], []
        history = zenoh.ext.HistoryConfig(detect_late_publishers=True, max_samples=1)
        adv = zenoh.ext.declare_advanced_subscriber(
            session, key, lambda s: latched.append((time.time() - t0, s)), history=history)
        sub = session.declare_subscriber(key, lambda s: plain.append(s))
        time.sleep(4.0)
        assert maps(status(coolgp_bin, port, fleet)) == maps(before), "a map came meanwhile"
        assert plain == []
        # The map publisher's token in the ROS graph carries its QoS (rmw_zenoh's encoding).
        tokens = [str(r.ok.key_expr) for r in session.liveliness().get("@ros2_lv/0/**")
                  if r.ok is not None]
        map_tokens = [t for t in tokens if "/MP/" in t and "%coolgp%map/" in t]
        qos = ":1:,1:,:,:,," if durability == "transient-local" else "::,10:,:,:,,"
        assert len(map_tokens) == 1 and map_tokens[0].endswith("/" + qos), tokens
        if durability == "volatile":
            assert latched == []
            return
        assert len(latched) == 1, [(t, str(s.key_expr)) for t, s in latched]
        after_s, sample = latched[0]
        assert after_s < 3.0 and str(sample.key_expr) == key
        cloud = typestore.deserialize_cdr(bytes(sample.payload.to_bytes()), ty)
        assert (cloud.width, cloud.height) == (4, 3)
        att = bytes(sample.attachment.to_bytes())
        assert len(att) == 33 and att[16] == 16, att
        adv.undeclare()
        sub.undeclare()
    finally:
        session.close()
        stop(node)
