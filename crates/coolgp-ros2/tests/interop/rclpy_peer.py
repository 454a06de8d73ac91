#!/usr/bin/env python3
"""A real ROS 2 node (rclpy on Fast DDS, from the ros-rclpy wheels) for the DDS interop test:
publishes N NavSatFix on /fix and N Temperature on /temp (rclpy's default QoS), waits, then
prints one JSON object: the last PointCloud2 map and DiagnosticArray it received from the
coolgp node, and rclpy's view of the graph.

  rclpy_peer.py --n 60 --rate 20 --map /coolgp/map --node coolgp_1 [--settle 2]
Env: RMW_IMPLEMENTATION=rmw_fastrtps_cpp, ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST.
"""
import argparse
import json
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import NavSatFix, NavSatStatus, PointCloud2, Temperature

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=60)
ap.add_argument("--rate", type=float, default=20.0)
ap.add_argument("--map", default="/coolgp/map")
ap.add_argument("--node", default="coolgp_1")
ap.add_argument("--settle", type=float, default=2.0)
ap.add_argument("--nan-at", type=int, default=-1, help="publish a NaN latitude at this index")
a = ap.parse_args()

rclpy.init()
node = rclpy.create_node("rclpy_gps")
ex = SingleThreadedExecutor()
ex.add_node(node)


def spin_for(sec, until=lambda: False):
    t0 = time.time()
    while time.time() - t0 < sec and not until():
        ex.spin_once(timeout_sec=0.02)


DT = {7: "<f4", 8: "<f8"}
maps, diags = [], []


def on_map(msg):
    dt = np.dtype({"names": [f.name for f in msg.fields],
                   "formats": [DT[f.datatype] for f in msg.fields],
                   "offsets": [f.offset for f in msg.fields], "itemsize": msg.point_step})
    pts = np.frombuffer(bytes(msg.data), dtype=dt, count=msg.width * msg.height)
    maps.append({"width": msg.width, "height": msg.height, "frame_id": msg.header.frame_id,
                 "fields": [f.name for f in msg.fields],
                 "points": [{k: float(p[k]) for k in dt.names} for p in pts]})


def on_diag(msg):
    diags.append([{"name": s.name, "level": int.from_bytes(bytes(s.level), "little")
                   if isinstance(s.level, (bytes, bytearray)) else int(s.level),
                   "hardware_id": s.hardware_id,
                   "values": {kv.key: kv.value for kv in s.values}} for s in msg.status])


node.create_subscription(PointCloud2, a.map, on_map, 10)
try:
    from diagnostic_msgs.msg import DiagnosticArray
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
except ImportError:
    pass
fix_pub = node.create_publisher(NavSatFix, "/fix", 10)
temp_pub = node.create_publisher(Temperature, "/temp", 10)
spin_for(30, lambda: fix_pub.get_subscription_count() > 0 and temp_pub.get_subscription_count() > 0)
matched = fix_pub.get_subscription_count() > 0 and temp_pub.get_subscription_count() > 0
spin_for(0.5)
for i in range(a.n):
    m = NavSatFix()
    m.header.stamp = node.get_clock().now().to_msg()
    m.header.frame_id = "gps"
    m.status.status = NavSatStatus.STATUS_FIX
    m.status.service = NavSatStatus.SERVICE_GPS
    m.latitude = float("nan") if i == a.nan_at else 48.0 + 1e-5 * i
    m.longitude = 11.0 + 1e-5 * (i % 7)
    m.altitude = 500.0
    fix_pub.publish(m)
    t = Temperature()
    t.header.stamp = m.header.stamp
    t.header.frame_id = "thermo"
    t.temperature = 20.0 + 0.3 * np.sin(i / 5.0) + 0.01 * i
    t.variance = 0.01
    temp_pub.publish(t)
    spin_for(1.0 / a.rate)
spin_for(a.settle)
maps.clear()
diags.clear()
spin_for(10, lambda: len(maps) >= 2 and len(diags) >= 1)
graph = {
    "nodes": [[n, ns] for n, ns in node.get_node_names_and_namespaces()],
    "topics": {n: t for n, t in node.get_topic_names_and_types()},
}
try:
    graph["publishers"] = [[n, t] for n, t in node.get_publisher_names_and_types_by_node(a.node, "/")]
    graph["subscriptions"] = [[n, t] for n, t in node.get_subscriber_names_and_types_by_node(a.node, "/")]
except Exception as e:  # noqa: BLE001 - reported, the test decides
    graph["by_node_error"] = str(e)
print(json.dumps({"matched": matched, "map": maps[-1] if maps else None, "maps": len(maps),
                  "diagnostics": diags[-1] if diags else None, "graph": graph}))
node.destroy_node()
rclpy.shutdown()
