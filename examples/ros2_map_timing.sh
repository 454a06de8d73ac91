#!/usr/bin/env bash
# The time a node takes to compute its 100 x 100 ROS 2 map (BENCHMARKS.md §17): two nodes with
# 600 rows each (m = 50, B = 500), node 1 on an rmw_zenoh router publishing its map every 2 s;
# prints status `ros2.last_map_ms` every 5 s for a minute.
#   examples/ros2_map_timing.sh [own|fleet]
# Needs the venv of scripts/ci_ros2.sh (eclipse-zenoh, for the router): COOLGP_ROS2_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=${1:-own}
B=${COOLGP:-target/release/coolgp}
PY=${COOLGP_ROS2_VENV:-target/ros2-venv}/bin/python
DIR=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$DIR"' EXIT
python3 - "$DIR" <<'PY'
import math, sys
d = sys.argv[1]
for name, off in [("a", 0), ("b", 600)]:
    with open(f"{d}/{name}.csv", "w") as f:
        f.write("latitude,longitude,temperature\n")
        for k in range(600):
            i = k + off
            lat, lon = 48 + 0.0001 * ((i * 37) % 100), 11 + 0.0001 * ((i * 53) % 100)
            f.write(f"{lat!r},{lon!r},{20 + math.sin((lat - 48) * 3e4) + math.cos((lon - 11) * 2e4)!r}\n")
PY
"$PY" crates/coolgp-ros2/tests/interop/router.py tcp/127.0.0.1:7561 >"$DIR/router.log" 2>&1 &
sleep 1
COMMON=(--fleet "mt$$" --inducing 50 --batch 50 --round-ms 100 --target temperature)
"$B" node --id 2 --neighbors 1 "${COMMON[@]}" --data "$DIR/b.csv" --listen tcp/127.0.0.1:7563 >"$DIR/n2.log" 2>&1 &
"$B" node --id 1 --neighbors 2 "${COMMON[@]}" --data "$DIR/a.csv" --listen tcp/127.0.0.1:7562 \
  --connect tcp/127.0.0.1:7563 --ros2 zenoh --ros2-connect tcp/127.0.0.1:7561 \
  --ros2-map latitude=48:48.01:100,longitude=11:11.01:100 --ros2-map-every 2 \
  --ros2-map-source "$SOURCE" >"$DIR/n1.log" 2>&1 &
for _ in $(seq 1 12); do
  sleep 5
  "$B" status --connect tcp/127.0.0.1:7562 --fleet "mt$$" --agent 1 2>/dev/null | python3 -c \
    "import json,sys; s=json.load(sys.stdin); r=s['ros2']; print('$SOURCE', 'points', s['points'], 'fleet', s['fleet_points'], 'memory', s['local_points'], 'maps', r['maps'], 'last_map_ms', r['last_map_ms'])" || true
done
