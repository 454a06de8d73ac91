#!/usr/bin/env bash
# Run a fleet of N coolgp nodes on this machine and query them.
#
# Each node is its own process (a zenoh peer on 127.0.0.1), learns online from its own share of
# a synthetic data set (y = sin(x1) + 0.5 x2 + noise), and fuses with its neighbours on a path
# 0 - 1 - ... - (N-1). When every node's fused model represents all N x ROWS points, the script
# asks every node for predictions (`coolgp query`) and prints one node's status (`coolgp status`).
#
# Usage:   examples/fleet.sh [N]            (default N = 5)
# Env:     COOLGP    the binary            (default: target/release/coolgp, built with --features node if it lacks `node`)
#          BASE_PORT first listen port     (default 7447; node i listens on BASE_PORT + i)
#          M         inducing inputs       (default 20)
#          ROWS      rows per node         (default 200)
#          ROUND_MS  round period          (default 100)
#          NODE_FLAGS extra flags for every node, e.g. "--holdout test.csv" (default none)
#          KEEP=1    leave the nodes running (stop them with: kill $(cat $WORK/pids))
#          TLS=1     a secured fleet: `coolgp certs` into $WORK/pki, mutual TLS on tls/ endpoints
#                    and signed messages (`--tls`); the queries connect as the reader
set -euo pipefail

N=${1:-5}
BASE_PORT=${BASE_PORT:-7447}
M=${M:-20}
ROWS=${ROWS:-200}
ROUND_MS=${ROUND_MS:-100}
FLEET=${FLEET:-demo}
TLS=${TLS:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=examples/fleet_data.sh
. "$ROOT/examples/fleet_data.sh"
networked_coolgp "$ROOT"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-fleet.XXXXXX")
stop() {
  if [ "${KEEP:-0}" != 1 ] && [ -f "$WORK/pids" ]; then
    kill -TERM $(cat "$WORK/pids") 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  echo "logs, data and checkpoints: $WORK" >&2
}
trap stop EXIT

# 1. One CSV per node (awk only: no Python needed).
fleet_data "$WORK" "$N" "$ROWS"
fleet_security "$TLS" "$COOLGP" "$FLEET" "$N" "$WORK/pki"

# 2. Start the nodes: node i listens on BASE_PORT+i and connects to node i-1.
read -r -a node_flags <<< "${NODE_FLAGS:-}"
for i in $(seq 0 $((N - 1))); do
  nb=""
  [ "$i" -gt 0 ] && nb="$((i - 1))"
  [ "$i" -lt $((N - 1)) ] && nb="${nb:+$nb,}$((i + 1))"
  connect=()
  [ "$i" -gt 0 ] && connect=(--connect "$SCHEME/127.0.0.1:$((BASE_PORT + i - 1))")
  "$COOLGP" node --id "$i" --fleet "$FLEET" --inducing "$M" ${nb:+--neighbors "$nb"} \
    --data "$WORK/data$i.csv" --batch 50 --round-ms "$ROUND_MS" --state "$WORK/state$i" \
    --listen "$SCHEME/127.0.0.1:$((BASE_PORT + i))" "${connect[@]}" "${SEC[@]}" "${node_flags[@]}" > "$WORK/node$i.log" 2>&1 &
  echo $! >> "$WORK/pids"
done
echo "started $N nodes (fleet '$FLEET', ports $BASE_PORT..$((BASE_PORT + N - 1)))" >&2

# 3. Wait until every node's fused model holds all the data.
TOTAL=$((N * ROWS))
for i in $(seq 0 $((N - 1))); do
  for _ in $(seq 1 300); do
    if "$COOLGP" status --connect "$SCHEME/127.0.0.1:$((BASE_PORT + i))" --fleet "$FLEET" --agent "$i" \
        "${SEC[@]}" --timeout-ms 2000 2>/dev/null | grep -q "\"fleet_points\": $TOTAL.0"; then
      break
    fi
    sleep 0.2
  done
done
echo "every node's fused model represents $TOTAL points" >&2

# 4. Ask every node for predictions at three inputs (truth: sin(x1) + 0.5 x2).
printf 'x1,x2\n0,0\n1,-1\n-1.5,0.5\n' > "$WORK/query.csv"
for i in $(seq 0 $((N - 1))); do
  echo "== agent $i"
  "$COOLGP" query --connect "$SCHEME/127.0.0.1:$((BASE_PORT + i))" --fleet "$FLEET" --agent "$i" \
    "${SEC[@]}" --input "$WORK/query.csv"
done
echo "== truth: 0, $(awk 'BEGIN { printf "%.4f, %.4f", sin(1) - 0.5, sin(-1.5) + 0.25 }')"

# 5. One node's status (JSON).
"$COOLGP" status --connect "$SCHEME/127.0.0.1:$BASE_PORT" --fleet "$FLEET" --agent 0 "${SEC[@]}"
