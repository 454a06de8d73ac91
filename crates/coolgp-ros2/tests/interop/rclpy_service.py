#!/usr/bin/env python3
"""The real ROS 2 as a client of a coolgp node's point-query service (`--ros2-query-service`):
rclpy on Fast DDS (ros-rclpy wheels) calls the service, of type
rcl_interfaces/srv/GetParameters (rclpy ships it), and prints one JSON object: the answers of
the last call, each call's milliseconds, and rclpy's view of the service in the graph
(`get_service_names_and_types`, as `ros2 service list -t`).

  rclpy_service.py --service /robot1/coolgp/query [--repeat N] [--wait S] [--timeout S]
                   [--points-file F] POINT...
(--points-file: more points, one a line, after those given; --timeout: seconds a call may take.)
Env: RMW_IMPLEMENTATION=rmw_fastrtps_cpp, ROS_DOMAIN_ID, ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST.
"""
import argparse
import json
import time

import rclpy
from rcl_interfaces.srv import GetParameters

ap = argparse.ArgumentParser()
ap.add_argument("--service", required=True)
ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--wait", type=float, default=20.0)
ap.add_argument("--timeout", type=float, default=20.0)
ap.add_argument("--points-file")
ap.add_argument("points", nargs="*")
a = ap.parse_args()
if a.points_file:
    with open(a.points_file) as f:
        a.points += [line.strip() for line in f if line.strip()]

rclpy.init()
node = rclpy.create_node("rclpy_query")
client = node.create_client(GetParameters, a.service)
out = {"ready": client.wait_for_service(timeout_sec=a.wait), "answers": None, "ms": []}
if out["ready"]:
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        future = client.call_async(GetParameters.Request(names=list(a.points)))
        rclpy.spin_until_future_complete(node, future, timeout_sec=a.timeout)
        out["ms"].append((time.perf_counter() - t0) * 1e3)
        resp = future.result()
        if resp is None:
            out["answers"] = None
            break
        out["answers"] = [{"type": v.type, "values": list(v.double_array_value),
                           "string": v.string_value} for v in resp.values]
out["services"] = [[n, t] for n, t in node.get_service_names_and_types()]
print(json.dumps(out))
node.destroy_node()
rclpy.shutdown()
