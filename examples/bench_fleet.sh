#!/usr/bin/env bash
# Benchmark: a fleet of N coolgp nodes on one machine (binary tree, node i's parent is (i-1)/2),
# each with ROWS rows in blocks of BATCH. For each m in MS, it reports
#   - convergence time after the last block: (latest time any node's fused model changed)
#     − (latest time any node absorbed a block), from the nodes' status;
#   - bytes sent per node per round (payload bytes, from status: bytes_sent / rounds_run);
#   - CPU time per node per round (user + system, from /proc, over the whole run).
#
# Usage:   examples/bench_fleet.sh                 (N = 20, MS = "100 200")
# Env:     COOLGP, N, MS, ROWS (200), BATCH (50), ROUND_MS (100), BASE_PORT (17447),
#          RESEND (1: every message every round; N: unchanged messages every N rounds),
#          TLS (1: `coolgp certs`, mutual TLS and signed messages; default 0, an open fleet),
#          PROJECTION (per-agent, the default, or fleet: site sums ride in every message),
#          PGROUPS (fleet only: node i in projection group g<i mod PGROUPS>; default 0, no groups)
# Needs:   python3 (for JSON), awk.
set -euo pipefail
N=${N:-20}
MS=${MS:-"100 200"}
ROWS=${ROWS:-200}
BATCH=${BATCH:-50}
ROUND_MS=${ROUND_MS:-100}
RESEND=${RESEND:-1}
BASE_PORT=${BASE_PORT:-17447}
TLS=${TLS:-0}
PROJECTION=${PROJECTION:-per-agent}
PGROUPS=${PGROUPS:-0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=examples/fleet_data.sh
. "$ROOT/examples/fleet_data.sh"
networked_coolgp "$ROOT"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-bench.XXXXXX")
cleanup() {
  [ -f "$WORK/pids" ] && kill -TERM $(cat "$WORK/pids") 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT

fleet_data "$WORK" "$N" "$ROWS"

echo "N = $N nodes (binary tree), $ROWS rows each in blocks of $BATCH, round $ROUND_MS ms, resend every $RESEND, TLS $TLS, projection $PROJECTION, groups $PGROUPS, $(nproc) cores"
for M in $MS; do
  FLEET="bench-m$M"
  fleet_security "$TLS" "$COOLGP" "$FLEET" "$N" "$WORK/pki-m$M"
  rm -f "$WORK/pids"
  for i in $(seq 0 $((N - 1))); do
    nb=()
    [ "$i" -gt 0 ] && nb+=("$(((i - 1) / 2))")
    [ $((2 * i + 1)) -lt "$N" ] && nb+=("$((2 * i + 1))")
    [ $((2 * i + 2)) -lt "$N" ] && nb+=("$((2 * i + 2))")
    nbs=$(IFS=,; echo "${nb[*]}")
    grp=()
    [ "$PGROUPS" -gt 0 ] && grp=(--projection-group "g$((i % PGROUPS))")
    connect=()
    [ "$i" -gt 0 ] && connect=(--connect "$SCHEME/127.0.0.1:$((BASE_PORT + (i - 1) / 2))")
    "$COOLGP" node --id "$i" --fleet "$FLEET" --inducing "$M" --neighbors "$nbs" \
      --data "$WORK/data$i.csv" --batch "$BATCH" --round-ms "$ROUND_MS" --resend-every "$RESEND" \
      --projection "$PROJECTION" "${grp[@]}" --state "$WORK/m$M-state$i" --listen "$SCHEME/127.0.0.1:$((BASE_PORT + i))" "${connect[@]}" "${SEC[@]}" \
      > "$WORK/m$M-node$i.log" 2>&1 &
    echo $! >> "$WORK/pids"
    sleep 0.05
  done
  TOTAL=$((N * ROWS))
  status() {
    "$COOLGP" status --connect "$SCHEME/127.0.0.1:$((BASE_PORT + $1))" "${SEC[@]}" --fleet "$FLEET" --agent "$1" \
      --timeout-ms 5000 2>/dev/null
  }
  # Wait for every node to hold all the data, then 3 s more so nothing changes any longer.
  for i in $(seq 0 $((N - 1))); do
    for _ in $(seq 1 600); do
      status "$i" | grep -q "\"fleet_points\": $TOTAL.0" && break
      sleep 0.2
    done
  done
  sleep 3
  for i in $(seq 0 $((N - 1))); do status "$i" > "$WORK/m$M-status$i.json"; done
  # CPU ticks (user + system) of each node process so far.
  : > "$WORK/m$M-cpu"
  for p in $(cat "$WORK/pids"); do awk '{print $14 + $15}' "/proc/$p/stat" >> "$WORK/m$M-cpu"; done
  python3 - "$WORK" "$M" "$N" "$TOTAL" "$(getconf CLK_TCK)" <<'PY'
import json, sys
work, m, n, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
tck = float(sys.argv[5])
ticks = [float(l) for l in open(f"{work}/m{m}-cpu") if l.strip()]
st = [json.load(open(f"{work}/m{m}-status{i}.json")) for i in range(n)]
assert all(s["fleet_points"] == total for s in st), "not converged"
last_block = max(s["last_block_unix_ms"] for s in st)
settled = max(s["fused_changed_unix_ms"] for s in st)
per_round = [s["bytes_sent"] / max(s["rounds_run"], 1) for s in st]
per_msg = sum(s["bytes_sent"] for s in st) / max(sum(s["messages_sent"] for s in st), 1)
ckpt = sum(s["checkpoint_bytes"] for s in st) / n
held = sum(s.get("messages_unchanged_held", 0) for s in st)
cpu_ms_round = 1000 * sum(ticks) / tck / max(sum(s["rounds_run"] for s in st), 1)
print(f"m = {m}: converged {settled - last_block} ms after the last block; "
      f"bytes/node/round mean {sum(per_round)/n:,.0f} (min {min(per_round):,.0f}, max {max(per_round):,.0f}); "
      f"{per_msg:,.0f} bytes/message; {held:,} unchanged messages held; checkpoint {ckpt:,.0f} bytes; "
      f"CPU {cpu_ms_round:.2f} ms/node/round; tls {all(s.get('tls', False) for s in st)}")
PY
  kill -TERM $(cat "$WORK/pids") 2>/dev/null || true
  wait 2>/dev/null || true
  rm -f "$WORK/pids"
done
