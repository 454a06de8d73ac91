#!/usr/bin/env python3
"""A ROS 2 service client over rmw_zenoh we did not write: zenoh-ros2-sdk's ROS2ServiceClient
(robotis, PyPI), with rosbags' Jazzy types, calling a node's point-query service
(`--ros2-query-service`, type rcl_interfaces/srv/GetParameters) and listing the services of the
graph as `ros2 service list -t` does (the SDK's get_service_names_and_types).

  service_peer.py -e tcp/127.0.0.1:7447 call --service /robot1/coolgp/query [--repeat N] POINT...
      prints {"answers": [...], "hash": the SDK's RIHS01 of the type, "ms": [per call]}
  service_peer.py -e tcp/127.0.0.1:7447 list
      prints [[service, [types]], ...]

The SDK computes the type hash from the .srv text and the nested types' .msg text: given here
from the rcl_interfaces, service_msgs and builtin_interfaces that the ros-rcl-interfaces wheels
install (share/), else from the text below (ROS 2 Jazzy's definitions)."""
import argparse, json, os, pathlib, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("-e", "--connect", required=True)
ap.add_argument("-d", "--domain", type=int, default=0)
sp = ap.add_subparsers(dest="cmd", required=True)
p = sp.add_parser("call")
p.add_argument("--service", required=True)
p.add_argument("--repeat", type=int, default=1)
p.add_argument("points", nargs="*")
sp.add_parser("list")
a = ap.parse_args()

os.environ["ZENOH_CONFIG_OVERRIDE"] = ";".join([
    'mode="client"', f"connect/endpoints={json.dumps([a.connect])}",
    "scouting/multicast/enabled=false"])

import zenoh_ros2_sdk._cache as _cache
def _no_git(*_a, **_k): raise RuntimeError("zenoh-ros2-sdk tried to git-clone definitions (offline)")
_cache.clone_to_cache = _no_git
from rosbags.typesys import Stores, get_typestore
from zenoh_ros2_sdk import ZenohSession
from zenoh_ros2_sdk.discovery import get_service_names_and_types
from zenoh_ros2_sdk.service_client import ROS2ServiceClient
from zenoh_ros2_sdk.utils import compute_service_type_hash

SM = ZenohSession.get_instance()
SM.store = get_typestore(Stores.ROS2_JAZZY)

SRV = "rcl_interfaces/srv/GetParameters"
REQUEST, RESPONSE = "string[] names", "rcl_interfaces/ParameterValue[] values"
FALLBACK = {  # ROS 2 Jazzy, comments and constants left out (not in the hash)
    "rcl_interfaces/msg/ParameterValue": "uint8 type\nbool bool_value\nint64 integer_value\n"
    "float64 double_value\nstring string_value\nbyte[] byte_array_value\n"
    "bool[] bool_array_value\nint64[] integer_array_value\nfloat64[] double_array_value\n"
    "string[] string_array_value\n",
    "service_msgs/msg/ServiceEventInfo": "uint8 event_type\nbuiltin_interfaces/Time stamp\n"
    "char[16] client_gid\nint64 sequence_number\n",
    "builtin_interfaces/msg/Time": "int32 sec\nuint32 nanosec\n",
}


def definition(name):
    pkg, _, short = name.split("/")
    f = pathlib.Path(sys.prefix) / "share" / pkg / "msg" / f"{short}.msg"
    return f.read_text() if f.is_file() else FALLBACK[name]


if a.cmd == "list":
    time.sleep(1.0)
    print(json.dumps(get_service_names_and_types(domain_id=a.domain, timeout=2.0)))
    sys.exit(0)

type_hash = compute_service_type_hash(SRV, REQUEST, RESPONSE,
                                      {n: definition(n) for n in FALLBACK})
client = ROS2ServiceClient(a.service, SRV, request_definition=REQUEST,
                           response_definition=RESPONSE, domain_id=a.domain,
                           type_hash=type_hash, timeout=20.0)
time.sleep(1.0)  # let the router learn the client's and the server's declarations
answers, ms = None, []
for _ in range(a.repeat):
    t0 = time.perf_counter()
    resp = client.call(names=list(a.points))
    ms.append((time.perf_counter() - t0) * 1e3)
    if resp is None:
        print(json.dumps({"answers": None, "hash": type_hash, "ms": ms}))
        sys.exit(1)
    answers = [{"type": int(v.type), "values": [float(x) for x in v.double_array_value],
                "string": v.string_value} for v in resp.values]
client.close()
print(json.dumps({"answers": answers, "hash": type_hash, "ms": ms}))
