#!/usr/bin/env python3
"""Independent rmw_zenoh peer for tests, built on zenoh-ros2-sdk (robotis) + rosbags (Jazzy types).

Neither is ours: zenoh-ros2-sdk (PyPI) speaks rmw_zenoh's keys, attachments and liveliness
tokens; rosbags serializes the CDR and computes the RIHS01 hashes. The two patches below keep
the SDK offline (it git-clones message definitions on a miss) and give it rosbags' type store.

  peer.py [-e tcp/127.0.0.1:7447]... [-l tcp/127.0.0.1:7450]... [--mode peer|client] [-d DOMAIN]
          [--node NAME] [--ns /NS] CMD ...
  CMD: pub  [-n N] [--rate HZ] [--wait-sub S] [--fix /fix] [--temp /temp]
                                                N NavSatFix on /fix + N Temperature on /temp
       pubmap [-n N] [--rate HZ] [--wait-sub S] N PointCloud2 (x,y,mean,variance float32) on /map
       sub  [--topic /map] [--type T] [-n N] [--timeout S]  print each message as one JSON line
       graph [--wait S]                         print the ROS graph (nodes, topics+types) as JSON
Peer mode with multicast scouting off: connect to a router (or a peer that listens) with -e,
or listen with -l and connect to nothing (-e none).
"""
import argparse, json, os, sys, time
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("-e", "--connect", action="append", default=None)
ap.add_argument("-l", "--listen", action="append", default=[])
ap.add_argument("--mode", default="peer", choices=["peer", "client"])
ap.add_argument("-d", "--domain", type=int, default=0)
ap.add_argument("--node", default="coolgp_peer")
ap.add_argument("--ns", default="/")
sp = ap.add_subparsers(dest="cmd", required=True)
for c in ("pub", "pubmap"):
    p = sp.add_parser(c); p.add_argument("-n", type=int, default=10)
    p.add_argument("--rate", type=float, default=10.0); p.add_argument("--wait-sub", type=float, default=0.0)
    if c == "pub":
        p.add_argument("--fix", default="/fix"); p.add_argument("--temp", default="/temp")
p = sp.add_parser("sub"); p.add_argument("--topic", default="/map"); p.add_argument("-n", type=int, default=1)
p.add_argument("--type", default="sensor_msgs/msg/PointCloud2")
p.add_argument("--timeout", type=float, default=10.0)
p = sp.add_parser("graph"); p.add_argument("--wait", type=float, default=1.0)
a = ap.parse_args()

# Zenoh session config: the SDK loads its rmw_zenoh-like default (peer, multicast off) and then
# applies ZENOH_CONFIG_OVERRIDE; that is the only way to pass an arbitrary endpoint / mode.
connect = [e for e in (a.connect or ([] if a.listen else ["tcp/127.0.0.1:7447"])) if e != "none"]
over = [f"mode={json.dumps(a.mode)}", f"connect/endpoints={json.dumps(connect)}",
        "scouting/multicast/enabled=false"]
if a.listen: over.append(f"listen/endpoints={json.dumps(a.listen)}")
os.environ["ZENOH_CONFIG_OVERRIDE"] = ";".join(over)

import zenoh_ros2_sdk._cache as _cache
def _no_git(*_a, **_k): raise RuntimeError("zenoh-ros2-sdk tried to git-clone message definitions (offline)")
_cache.clone_to_cache = _no_git  # the SDK's registry git-clones ros2 repos on a miss: never here
from rosbags.typesys import get_typestore, Stores
from conftest import cloud_points  # this directory is on the path of a script run from it
from zenoh_ros2_sdk import ZenohSession, ROS2Publisher, ROS2Subscriber, get_topic_names_and_types
from zenoh_ros2_sdk.entity import NodeEntity, EndpointEntity, EntityKind
from zenoh_ros2_sdk.keyexpr import node_liveliness_keyexpr, endpoint_liveliness_keyexpr

TS = get_typestore(Stores.ROS2_JAZZY)
SM = ZenohSession.get_instance()      # singleton; host/port args unused (override wins)
SM.store = TS                          # all Jazzy definitions: nested types serialize correctly
T = TS.types
NODE = {}                              # one NN token per process (the SDK declares one per endpoint)

def _tokens(self, kind, gid):
    node = NodeEntity(a.domain, SM.session_id, self.node_id, self.node_name, self.namespace)
    if not NODE:
        NODE["id"], NODE["tok"] = self.node_id, SM.liveliness.declare_token(node_liveliness_keyexpr(node))
    node = NodeEntity(a.domain, SM.session_id, NODE["id"], self.node_name, self.namespace)
    self.node_id, self.node_token = NODE["id"], None
    ep = EndpointEntity(node, self.entity_id, kind, self.topic, self.dds_type_name, self.type_hash, self.qos, gid)
    return SM.liveliness.declare_token(endpoint_liveliness_keyexpr(ep))

class Pub(ROS2Publisher):
    def _declare_liveliness_tokens(self): self.publisher_token = _tokens(self, EntityKind.PUBLISHER, self.publisher_gid)
class Sub(ROS2Subscriber):
    def _declare_liveliness_tokens(self): self.subscriber_token = _tokens(self, EntityKind.SUBSCRIPTION, self.subscriber_gid)

def ros(cls, topic, typ, *cb):
    SM._registered_types[typ] = typ   # skip the SDK's registry (.msg files / git)
    return cls(topic, typ, *cb, node_name=a.node, namespace=a.ns, domain_id=a.domain,
               type_hash=TS.hash_rihs01(typ))  # the SDK's own hash is wrong without dependency files

def header(frame):
    ns = time.time_ns()
    return T["std_msgs/msg/Header"](T["builtin_interfaces/msg/Time"](ns // 10**9, ns % 10**9), frame)

def wait_sub(topic, secs):
    end = time.time() + secs
    while time.time() < end:
        if any(r.ok for r in SM.liveliness.get(f"@ros2_lv/{a.domain}/*/*/*/MS/**", timeout=0.5)
               if r.ok and f"/%{topic.strip('/').replace('/', '%')}/" in str(r.ok.key_expr)):
            return True
        time.sleep(0.1)
    return False

def cloud_to_json(m):
    return {"frame_id": m.header.frame_id, "stamp": [m.header.stamp.sec, m.header.stamp.nanosec],
            "width": m.width, "height": m.height, "fields": [f.name for f in m.fields],
            "points": cloud_points(m)}

def to_json(m):
    """Any rosbags message as plain JSON (numpy arrays as lists)."""
    if hasattr(m, "__dataclass_fields__"):
        return {k: to_json(getattr(m, k)) for k in m.__dataclass_fields__ if k != "__msgtype__"}
    if isinstance(m, np.ndarray):
        return m.tolist()
    if isinstance(m, (list, tuple)):
        return [to_json(v) for v in m]
    return m

def graph():
    nodes, topics = {}, {}
    for r in SM.liveliness.get(f"@ros2_lv/{a.domain}/**", timeout=1.0):
        if not r.ok: continue
        f = str(r.ok.key_expr).split("/")
        ns, name = f[7].replace("%", "/"), f[8].replace("%", "/")
        fq = (ns.rstrip("/") + "/" + name)
        nodes[(f[2], f[3])] = {"name": name, "namespace": ns, "fqn": fq, "zid": f[2], "node_id": f[3]}
        if f[5] in ("MP", "MS") and len(f) >= 13:
            t = topics.setdefault(f[9].replace("%", "/"), {"types": set(), "publishers": [], "subscribers": []})
            t["types"].add(f[10]); t["publishers" if f[5] == "MP" else "subscribers"].append(fq)
    sdk = get_topic_names_and_types(domain_id=a.domain, include_hidden_topics=True)
    return {"nodes": sorted(nodes.values(), key=lambda n: (n["fqn"], n["zid"])),
            "topics": {k: {**v, "types": sorted(v["types"])} for k, v in sorted(topics.items())},
            "sdk_topic_names_and_types": sdk}

if a.cmd == "pub":
    fix = ros(Pub, a.fix, "sensor_msgs/msg/NavSatFix")
    tmp = ros(Pub, a.temp, "sensor_msgs/msg/Temperature")
    if a.wait_sub: print(json.dumps({"subscriber_seen": wait_sub(a.fix, a.wait_sub)}), flush=True)
    for i in range(a.n):
        fix.publish(header=header("gps"), status=T["sensor_msgs/msg/NavSatStatus"](0, 1),
                    latitude=48.0 + i * 1e-5, longitude=11.0 + i * 1e-5, altitude=500.0 + i,
                    position_covariance=np.eye(3).flatten() * 0.25, position_covariance_type=2)
        tmp.publish(header=header("thermo"), temperature=20.0 + 0.5 * i, variance=0.01)
        print(json.dumps({"sent": i + 1, "fix_key": fix.keyexpr, "temp_key": tmp.keyexpr}), flush=True)
        time.sleep(1.0 / a.rate)
elif a.cmd == "pubmap":
    pm = ros(Pub, "/map", "sensor_msgs/msg/PointCloud2")
    if a.wait_sub: print(json.dumps({"subscriber_seen": wait_sub("/map", a.wait_sub)}), flush=True)
    PF = T["sensor_msgs/msg/PointField"]
    fields = [PF(n, 4 * k, PF.FLOAT32, 1) for k, n in enumerate(["x", "y", "mean", "variance"])]
    for i in range(a.n):
        pts = np.array([[x, y, 0.1 * (x + y) + i, 0.01 * (1 + x)] for x in range(3) for y in range(2)], "<f4")
        pm.publish(header=header("map"), height=1, width=len(pts), fields=fields, is_bigendian=False,
                   point_step=16, row_step=16 * len(pts), data=np.frombuffer(pts.tobytes(), np.uint8),
                   is_dense=True)
        print(json.dumps({"sent": i + 1, "key": pm.keyexpr}), flush=True)
        time.sleep(1.0 / a.rate)
elif a.cmd == "sub":
    got = []
    conv = cloud_to_json if a.type == "sensor_msgs/msg/PointCloud2" else to_json
    s = ros(Sub, a.topic, a.type,
            lambda m: (got.append(1), print(json.dumps(conv(m)), flush=True)))
    end = time.time() + a.timeout
    while len(got) < a.n and time.time() < end: time.sleep(0.05)
    print(json.dumps({"received": len(got), "key": s.keyexpr}), file=sys.stderr)
    if len(got) < a.n: SM.close(); sys.exit(1)
elif a.cmd == "graph":
    time.sleep(a.wait)
    print(json.dumps(graph(), indent=1))
SM.close()   # flushes queued samples and undeclares the liveliness tokens
