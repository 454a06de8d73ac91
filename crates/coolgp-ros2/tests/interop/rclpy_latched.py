#!/usr/bin/env python3
"""A late ROS 2 subscriber (rclpy on Fast DDS) for the latched-map test: starts, prints
`ready`, waits for a line on stdin, then subscribes to the map twice, with
QoSDurabilityPolicy.TRANSIENT_LOCAL (keep last 1) and with the default volatile QoS, spins
`--wait` seconds and prints one JSON object: when each map arrived (seconds after
subscribing) and its size.

  rclpy_latched.py --map /coolgp/map --wait 4
Env: RMW_IMPLEMENTATION=rmw_fastrtps_cpp, ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST.
"""
import argparse
import json
import sys
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy
from sensor_msgs.msg import PointCloud2

ap = argparse.ArgumentParser()
ap.add_argument("--map", default="/coolgp/map")
ap.add_argument("--wait", type=float, default=4.0)
a = ap.parse_args()

rclpy.init()
node = rclpy.create_node("rclpy_late_viewer")
ex = SingleThreadedExecutor()
ex.add_node(node)
print("ready", flush=True)
sys.stdin.readline()

t0 = time.time()
got = {"transient_local": [], "volatile": []}


def on(kind):
    def cb(msg):
        got[kind].append({"after_s": time.time() - t0, "width": msg.width, "height": msg.height,
                          "bytes": len(msg.data)})
    return cb


latched = QoSProfile(history=QoSHistoryPolicy.KEEP_LAST, depth=1,
                     reliability=QoSReliabilityPolicy.RELIABLE,
                     durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)
node.create_subscription(PointCloud2, a.map, on("transient_local"), latched)
node.create_subscription(PointCloud2, a.map, on("volatile"), 10)
while time.time() - t0 < a.wait:
    ex.spin_once(timeout_sec=0.02)
print(json.dumps(got), flush=True)
node.destroy_node()
rclpy.shutdown()
