"""`coolgp node --ros2 zenoh --ros2-distro humble` against ROS 2 Humble's rmw_zenoh as its
sources define it (ros2/rmw_zenoh, branch `humble`, rmw_zenoh_cpp 0.1.9): the same key layout,
liveliness tokens, QoS field and 33-byte attachment as Jazzy's, except that every type hash, in
keys and tokens, is the literal `TypeHashNotSupported` (rmw_publisher_data.cpp,
rmw_subscription_data.cpp, rmw_service_data.cpp, rmw_client_data.cpp); releases 0.1.0-0.1.1
wrote a keyed attachment instead (attachment_helpers.cpp).

`HumblePeer` is such a node built on eclipse-zenoh's Python API and rosbags' CDR: no Humble
rmw_zenoh can be installed here (it ships as Debian packages from ROS's own apt repository, not
from PyPI or Debian). With `--ros2-distro humble` the node learns the peer's NavSatFix +
Temperature, and its map, its endpoint tokens and its query service carry Humble's keys; with
the default (jazzy) it learns the same Humble publisher but publishes under RIHS01 keys, which
a Humble subscriber does not match."""
import hashlib
import itertools
import math
import os
import subprocess
import time

import pytest

from conftest import (answers, cloud_points, free_port, get_parameters_types, grid_csv,
                      navsatfix, run, status, stop, temperature, wait_for, zenoh_client)

pytest.importorskip("zenoh")

HUMBLE = "TypeHashNotSupported"
GRID = "latitude=48:48.0006:4,longitude=11:11.0004:3"
LATS = [48 + 0.0006 * k / 3 for k in range(4)]
LONS = [11 + 0.0004 * k / 2 for k in range(3)]
FIX, TEMP = "sensor_msgs/msg/NavSatFix", "sensor_msgs/msg/Temperature"
CLOUD, SRV = "sensor_msgs/msg/PointCloud2", "rcl_interfaces::srv::dds_::GetParameters_"


def dds(msgtype):
    """`pkg/msg/Name` as DDS names it: `pkg::msg::dds_::Name_`."""
    pkg, kind, name = msgtype.split("/")
    return f"{pkg}::{kind}::dds_::{name}_"


def plain_attachment(seq, gid):
    """Humble >= 0.1.2 (as Jazzy >= 0.2.4): sequence, source time (i64 LE), 0x10, GID."""
    return seq.to_bytes(8, "little") + time.time_ns().to_bytes(8, "little") + b"\x10" + gid


def keyed_attachment(seq, gid):
    """Humble 0.1.0-0.1.1: each value after its name, as zenoh-ext's serializer writes them."""
    import zenoh.ext as ze

    return bytes(ze.z_serialize(("sequence_number", ze.Int64(seq), "source_timestamp",
                                 ze.Int64(time.time_ns()), "source_gid",
                                 [ze.UInt8(b) for b in gid])).to_bytes())


class HumblePeer:
    """A ROS 2 Humble node on rmw_zenoh: its node token, one token per endpoint
    (`@ros2_lv/<domain>/<zid>/<node id>/<entity id>/<kind>/<enclave>/<namespace>/<node>/
    <topic>/<type>/TypeHashNotSupported/<qos>`, `/` written `%`), samples on
    `<domain>/<topic>/<type>/TypeHashNotSupported` with the 33-byte attachment. The GID is a
    stand-in (rmw_zenoh's is the XXH3-128 of the token; no subscriber checks how it is made)."""

    def __init__(self, router, node="gps", domain=0):
        self.session, self.domain, self.node = zenoh_client(router), domain, node
        self.zid, self.ids = str(self.session.info.zid()), itertools.count(1)
        self.tokens = [self.session.liveliness().declare_token(self.prefix(0, "NN"))]

    def prefix(self, entity_id, kind):
        return f"@ros2_lv/{self.domain}/{self.zid}/0/{entity_id}/{kind}/%/%/{self.node}"

    def endpoint(self, kind, name, type_name, qos="::,10:,:,:,,"):
        key = (f"{self.prefix(next(self.ids), kind)}/{name.replace('/', '%')}/{type_name}/"
               f"{HUMBLE}/{qos}")
        self.tokens.append(self.session.liveliness().declare_token(key))
        return key

    def publisher(self, topic, msgtype):
        """A function that publishes one serialized message on `topic`."""
        token = self.endpoint("MP", topic, dds(msgtype))
        gid = hashlib.sha256(token.encode()).digest()[:16]
        pub = self.session.declare_publisher(
            f"{self.domain}/{topic.strip('/')}/{dds(msgtype)}/{HUMBLE}")
        seq = itertools.count(1)
        return lambda payload: pub.put(bytes(payload), attachment=plain_attachment(next(seq), gid))

    def graph(self):
        """Every liveliness token of the domain."""
        return [str(r.ok.key_expr)
                for r in self.session.liveliness().get(f"@ros2_lv/{self.domain}/**", timeout=2)
                if r.ok is not None]

    def close(self):
        self.session.close()


def node_tokens(peer, node="coolgp_1"):
    """The node's endpoint tokens, split at `/`, once its two subscriptions show."""
    deadline = time.time() + 20
    while time.time() < deadline:
        mine = [t.split("/") for t in peer.graph() if f"/%/%/{node}/" in t]
        if sum(p[5] == "MS" for p in mine) == 2:
            return mine
        time.sleep(0.2)
    raise AssertionError(f"the node's subscriptions never showed: {peer.graph()}")


def call(peer, req_t, resp_t, typestore, attachment):
    """One GetParameters call on Humble's service key; (answers, reply attachment)."""
    key = f"0/coolgp/query/{SRV}/{HUMBLE}"
    payload = typestore.serialize_cdr(typestore.types[req_t](names=["48.0002,11.0001"]), req_t)
    replies = list(peer.session.get(key, payload=bytes(payload), attachment=attachment,
                                    timeout=20))
    assert len(replies) == 1 and replies[0].ok is not None, replies
    ok = replies[0].ok
    assert str(ok.key_expr) == key
    resp = typestore.deserialize_cdr(bytes(ok.payload.to_bytes()), resp_t)
    return answers(resp), bytes(ok.attachment.to_bytes())


def the_map(maps, coolgp_bin, tmp_path, port, fleet):
    """The last map received, once it equals `coolgp query --agent 1` at the grid points
    (1e-12; the model settles after the stream ends)."""
    q = grid_csv(tmp_path / "grid.csv", LATS, LONS)
    for _ in range(6):
        time.sleep(1.0)
        assert maps, "no map under the node's distribution's key"
        key, cloud, att = maps[-1]
        _, out, _ = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port}", "--fleet",
                         fleet, "--agent", "1", "--input", q])
        rows = [list(map(float, l.split(","))) for l in out.splitlines()[1:]]
        if all(math.isclose(p["mean"], m, rel_tol=1e-12)
               and math.isclose(p["variance"], v, rel_tol=1e-12)
               for p, (m, v, _) in zip(cloud_points(cloud), rows, strict=True)):
            return key, cloud, att
    raise AssertionError(f"the map never equalled the query: {cloud_points(cloud)[:2]}, {rows[:2]}")


@pytest.mark.parametrize("distro", ["humble", "jazzy"])
def test_a_humble_publisher_is_learned_and_mapped(coolgp_bin, tmp_path, router, typestore,
                                                  distro):
    port, fleet = free_port(), f"hb{os.getpid()}{distro}"
    flags = ["--ros2-distro", "humble"] if distro == "humble" else []
    node = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--fleet", fleet, "--inducing", "12", "--batch", "10",
         "--round-ms", "50", "--listen", f"tcp/127.0.0.1:{port}", "--local-memory", "0",
         "--ros2", "zenoh", "--ros2-connect", router, *flags,
         "--ros2-input", f"/fix:{FIX}:latitude,longitude",
         "--ros2-target", f"/temp:{TEMP}:temperature", "--ros2-tolerance", "0.02",
         "--ros2-map", GRID, "--ros2-map-every", "0.3", "--ros2-query-service", "coolgp/query"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "node.log", "w"))
    peer = HumblePeer(router)
    maps = {"humble": [], "jazzy": []}
    keys = {"humble": f"0/coolgp/map/{dds(CLOUD)}/{HUMBLE}",
            "jazzy": f"0/coolgp/map/{dds(CLOUD)}/{typestore.hash_rihs01(CLOUD)}"}
    subs = [peer.session.declare_subscriber(
        key, lambda s, d=d: maps[d].append((str(s.key_expr), typestore.deserialize_cdr(
            bytes(s.payload.to_bytes()), CLOUD), bytes(s.attachment.to_bytes()))))
        for d, key in keys.items()]
    try:
        fix, temp = peer.publisher("/fix", FIX), peer.publisher("/temp", TEMP)
        # The node's tokens carry its distribution's hash: Humble's constant or RIHS01.
        mine = node_tokens(peer)
        kinds = sorted(p[5] for p in mine if len(p) == 13)
        assert kinds == ["MP", "MP", "MS", "MS", "SS"], mine
        for p in (p for p in mine if len(p) == 13):
            assert (p[11] == HUMBLE) == (distro == "humble"), p
            assert p[11] == HUMBLE or p[11].startswith("RIHS01_"), p
        t0 = 1_700_000_000_000_000_000
        for k in range(40):
            t = t0 + k * 100_000_000
            fix(typestore.serialize_cdr(
                navsatfix(typestore, t, 48 + 1.5e-5 * k, 11 + 1e-5 * (k % 7)), FIX))
            temp(typestore.serialize_cdr(
                temperature(typestore, t + 2_000_000, 21 + 0.2 * math.cos(k / 4)), TEMP))
            time.sleep(0.01)
        st = wait_for(lambda s: s["points"] == 40, "40 points", coolgp_bin, port, fleet)
        r = st["ros2"]
        assert (r["messages"], r["rows"], r["wrong_type"], r["bad_cdr"]) == (80, 40, 0, 0), r

        key, cloud, att = the_map(maps[distro], coolgp_bin, tmp_path, port, fleet)
        assert key == keys[distro] and (cloud.width, cloud.height) == (4, 3)
        assert len(att) == 33 and att[16] == 16 and int.from_bytes(att[:8], "little") >= 1
        other = "jazzy" if distro == "humble" else "humble"
        assert maps[other] == [], f"a map under {other}'s key"

        # A Humble client's call, with either attachment form, is answered in that form.
        req_t, resp_t = get_parameters_types(typestore)
        q = tmp_path / "point.csv"
        q.write_text("latitude,longitude\n48.0002,11.0001\n")
        _, out, _ = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port}", "--fleet",
                         fleet, "--agent", "1", "--input", q])
        answer = list(map(float, out.splitlines()[1].split(",")))
        gid = bytes(range(16))
        for form, make, length in [("plain", plain_attachment, 33),
                                   ("keyed", keyed_attachment, 77)]:
            got, back = call(peer, req_t, resp_t, typestore, make(5, gid))
            assert len(back) == length and back[-17:] == b"\x10" + gid, (form, back)
            seq_at = 0 if form == "plain" else 16
            assert int.from_bytes(back[seq_at:seq_at + 8], "little") == 5, (form, back)
            assert got[0]["type"] == 8, got
            assert all(math.isclose(a, b, rel_tol=1e-12)
                       for a, b in zip(got[0]["values"], answer, strict=True)), (got, answer)
        assert status(coolgp_bin, port, fleet)["ros2"]["service_calls"] == 2
        assert node.poll() is None
    finally:
        for s in subs:
            s.undeclare()
        peer.close()
        stop(node)
