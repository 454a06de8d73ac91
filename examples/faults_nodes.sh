#!/usr/bin/env bash
# A broken sensor among N coolgp nodes: found, contained and readmitted (issue 29,
# docs/MEMBERS.md §5).
#
# N nodes on a path learn y = sin(x1) + 0.5 x2 + noise, each from its own share, with the
# defaults (local memory, the fleet's pooled fit, the member check). The last node's targets
# read 5 too high. The script waits until every node's status lists it among the suspects,
# prints its evidence, asks the fleet (`coolgp query --all`, which leaves it out), then restarts
# it with repaired rows and waits until it is readmitted and every fused model holds all rows.
#
# Usage:   examples/faults_nodes.sh [N]     (default N = 3)
# Env:     COOLGP, BASE_PORT (default 7547), M, ROWS, ROUND_MS, TLS=1: as examples/fleet.sh
set -euo pipefail

N=${1:-3}
BASE_PORT=${BASE_PORT:-7547}
M=${M:-20}
ROWS=${ROWS:-200}
ROUND_MS=${ROUND_MS:-100}
FLEET=${FLEET:-faults}
TLS=${TLS:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=examples/fleet_data.sh
. "$ROOT/examples/fleet_data.sh"
networked_coolgp "$ROOT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-faults.XXXXXX")
stop() {
  [ -f "$WORK/pids" ] && kill -TERM $(cat "$WORK/pids") 2>/dev/null || true
  wait 2>/dev/null || true
  echo "logs and data: $WORK" >&2
}
trap stop EXIT

fleet_data "$WORK" "$N" "$ROWS"
fleet_security "$TLS" "$COOLGP" "$FLEET" "$N" "$WORK/pki"
BAD=$((N - 1))
mv "$WORK/data$BAD.csv" "$WORK/clean$BAD.csv"
awk -F, 'NR == 1 { print; next } { printf "%s,%s,%.6f\n", $1, $2, $3 + 5 }' \
  "$WORK/clean$BAD.csv" > "$WORK/data$BAD.csv"

start() { # start I DATA
  local i=$1 nb="" connect=()
  [ "$i" -gt 0 ] && nb="$((i - 1))"
  [ "$i" -lt $((N - 1)) ] && nb="${nb:+$nb,}$((i + 1))"
  [ "$i" -gt 0 ] && connect=(--connect "$SCHEME/127.0.0.1:$((BASE_PORT + i - 1))")
  "$COOLGP" node --id "$i" --fleet "$FLEET" --inducing "$M" ${nb:+--neighbors "$nb"} \
    --data "$2" --batch 20 --round-ms "$ROUND_MS" \
    --listen "$SCHEME/127.0.0.1:$((BASE_PORT + i))" "${connect[@]}" "${SEC[@]}" \
    >> "$WORK/node$i.log" 2>&1 &
  echo $! > "$WORK/pid$i"
  cat "$WORK"/pid[0-9]* > "$WORK/pids"
}
status() { # status I: the node's status on one line
  "$COOLGP" status --connect "$SCHEME/127.0.0.1:$((BASE_PORT + $1))" --fleet "$FLEET" \
    --agent "$1" "${SEC[@]}" --timeout-ms 2000 2>/dev/null | tr -d ' \n'
}
wait_all() { # wait_all WHAT PATTERN: until every node's status matches PATTERN
  local i
  for i in $(seq 0 $((N - 1))); do
    for _ in $(seq 1 600); do
      status "$i" | grep -q "$2" && break
      sleep 0.2
    done
    status "$i" | grep -q "$2" || { echo "node $i: no $1 after 2 minutes" >&2; exit 1; }
  done
  echo "every node: $1" >&2
}

for i in $(seq 0 $((N - 1))); do start "$i" "$WORK/data$i.csv"; done
echo "started $N nodes; node $BAD's targets read +5" >&2
wait_all "node $BAD is a suspect" "\"suspects\":\[$BAD\]"
echo "node $BAD's evidence and state:"
status "$BAD" | grep -o '"member":{[^}]*}\|"withheld":[a-z]*\|"withheld_since_round":[0-9]*'
echo "node 0's fused model holds $(status 0 | grep -o '"fleet_points":[0-9.]*' | cut -d: -f2) points (the honest nodes' $(( (N - 1) * ROWS )))"
printf 'x1,x2\n0,0\n1,-1\n-1.5,0.5\n' > "$WORK/query.csv"
"$COOLGP" query --all --fleet "$FLEET" --connect "$SCHEME/127.0.0.1:$BASE_PORT" "${SEC[@]}" \
  --input "$WORK/query.csv"
echo "== truth: 0, $(awk 'BEGIN { printf "%.4f, %.4f", sin(1) - 0.5, sin(-1.5) + 0.25 }')"

kill -TERM "$(cat "$WORK/pid$BAD")"
wait "$(cat "$WORK/pid$BAD")" 2>/dev/null || true
start "$BAD" "$WORK/clean$BAD.csv"
echo "node $BAD restarted with repaired rows" >&2
wait_all "no suspect, all $((N * ROWS)) rows fused" "\"fleet_points\":$((N * ROWS)).0.*\"suspects\":\[\]"
