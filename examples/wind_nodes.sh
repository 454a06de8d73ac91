#!/usr/bin/env bash
# The 12 Irish wind stations as 12 real `coolgp node` processes (issue 28's node figure).
#
# `coolgp export --dataset wind --agent-by station` gives the simulator's standardized split;
# each station's training rows (in time order) go to one node; the nodes form a path
# 0 - 1 - ... - 11 over 127.0.0.1 with every flag at its default but the ones named below, and
# learn their global model, their local memories and the fleet's residual kernel (the fitter,
# node 0, fits on neighbourhood groups of every node's rows, docs/LOCAL.md §11). When every
# stream has ended and the kernel has settled, `coolgp query --all` asks every node at the
# first 2,000 test rows and the script prints the fleet query's RMSE in knots under each rule.
#
# Usage:   examples/wind_nodes.sh [RUNS]     (default 1; each run a new fleet)
# Env:     COOLGP     the binary (default: target/release/coolgp, built with --features node)
#          BASE_PORT  first listen port (default 7600)
#          NODE_FLAGS extra flags for every node (default none)
# Prints:  one line per run: "run K: default R0 rbcm R1 bcm R2 min-variance R3 calibrated R4
#          (knots; the rule and weight --calibrate chose; the fitter's calibration the default
#          applied), kernel [...]"
set -euo pipefail

RUNS=${1:-1}
BASE_PORT=${BASE_PORT:-7600}
N=12
FLEET=${FLEET:-wind}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=examples/fleet_data.sh
. "$ROOT/examples/fleet_data.sh"
networked_coolgp "$ROOT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-wind-nodes.XXXXXX")
stop() {
  if [ -f "$WORK/pids" ]; then
    kill -TERM $(cat "$WORK/pids") 2>/dev/null || true
    wait 2>/dev/null || true
    rm -f "$WORK/pids"
  fi
}
trap 'stop; echo "logs: $WORK" >&2' EXIT

# 1. The split, one CSV per station (rows in the export's order: time order per station), and
#    the query rows (the first 2,000 test rows, inputs only) with their targets apart.
"$COOLGP" export --dataset wind --agent-by station --out "$WORK/split" > /dev/null
awk -F, -v dir="$WORK" 'NR == 1 { next } { f = dir "/data" $6 ".csv";
  if (!(f in seen)) { print "x0,x1,x2,x3,y" > f; seen[f] = 1 } print $1 "," $2 "," $3 "," $4 "," $5 > f }' \
  "$WORK/split/train.csv"
awk -F, 'NR <= 2001 { print $1 "," $2 "," $3 "," $4 }' "$WORK/split/test.csv" > "$WORK/query.csv"
awk -F, 'NR > 1 && NR <= 2001 { print $5 }' "$WORK/split/test.csv" > "$WORK/truth.txt"
Y_SCALE=$(grep -o '"y_scale": [0-9.eE+-]*' "$WORK/split/split.json" | awk '{print $2}')
TOTAL=$(( $(cat "$WORK"/data*.csv | wc -l) - N ))
connects=()
for i in $(seq 0 $((N - 1))); do connects+=(--connect "tcp/127.0.0.1:$((BASE_PORT + i))"); done
read -r -a node_flags <<< "${NODE_FLAGS:-}"

for run in $(seq 1 "$RUNS"); do
  # 2. The nodes on a path.
  for i in $(seq 0 $((N - 1))); do
    nb=""
    [ "$i" -gt 0 ] && nb="$((i - 1))"
    [ "$i" -lt $((N - 1)) ] && nb="${nb:+$nb,}$((i + 1))"
    connect=()
    [ "$i" -gt 0 ] && connect=(--connect "tcp/127.0.0.1:$((BASE_PORT + i - 1))")
    "$COOLGP" node --id "$i" --fleet "$FLEET" --neighbors "$nb" --data "$WORK/data$i.csv" \
      --target y --projection fleet --inducing 50 --batch 10 --round-ms 20 \
      --state "$WORK/run$run/state$i" --listen "tcp/127.0.0.1:$((BASE_PORT + i))" \
      "${connect[@]}" "${node_flags[@]}" > "$WORK/run$run.node$i.log" 2>&1 &
    echo $! >> "$WORK/pids"
  done
  # 3. Every stream ended and every fused model holds all the rows; then the fitter's last
  #    fit (it fits once more when the fused model has settled for 2 s) and the others taking
  #    it: wait until node 0's fit count stays the same for 6 s and every node holds its kernel.
  status() {
    "$COOLGP" status --connect "tcp/127.0.0.1:$((BASE_PORT + $1))" --fleet "$FLEET" --agent "$1" \
      --timeout-ms 3000 2>/dev/null || true
  }
  for i in $(seq 0 $((N - 1))); do
    for _ in $(seq 1 1500); do
      s=$(status "$i")
      if echo "$s" | grep -q '"stream_ended": true' && echo "$s" | grep -q "\"fleet_points\": $TOTAL.0"; then
        break
      fi
      sleep 0.2
    done
  done
  kernel() { status "$1" | tr -d '\n ' | grep -o '"local_kernel":\[[^]]*\]'; }
  last=""; same=0
  for _ in $(seq 1 120); do
    fits=$(status 0 | grep -o '"local_pooled_fits": [0-9]*' | awk '{print $2}')
    if [ "$fits" = "$last" ]; then same=$((same + 1)); else same=0; last=$fits; fi
    if [ "$same" -ge 6 ]; then
      k0=$(kernel 0); all=1
      for i in $(seq 1 $((N - 1))); do [ "$(kernel "$i")" = "$k0" ] || all=0; done
      [ "$all" = 1 ] && break
    fi
    sleep 1
  done
  # 4. The fitter's calibration after its last fit (docs/NODE.md: the default rule).
  calibration() { status 0 | tr -d '\n ' | grep -o '"fleet_calibration":{[^}]*}' || true; }
  for _ in $(seq 1 60); do
    calibration | grep -q "\"fit\":$last}" && break
    sleep 1
  done
  # 5. The fleet query by default (the fitter's calibration), under each rule, and calibrated
  #    on 64 held-out memory rows per node (the rule chosen on them, the safety net's weight;
  #    docs/LOCAL.md §12).
  line="run $run:"
  for rule in default rbcm bcm min-variance calibrated; do
    flags=(--fleet-rule "$rule")
    [ "$rule" = calibrated ] && flags=(--calibrate 64)
    [ "$rule" = default ] && flags=()
    "$COOLGP" query "${connects[@]}" --fleet "$FLEET" --all "${flags[@]}" \
      --input "$WORK/query.csv" --timeout-ms 30000 > "$WORK/run$run.$rule.csv" 2> "$WORK/run$run.$rule.err"
    rmse=$(tail -n +2 "$WORK/run$run.$rule.csv" | cut -d, -f1 | paste -d, - "$WORK/truth.txt" |
      awk -F, -v s="$Y_SCALE" '{ e = $1 - $2; t += e * e; n++ } END { printf "%.3f", sqrt(t / n) * s }')
    line="$line $rule $rmse"
  done
  chosen=$(grep -o 'rule [a-z-]* (weight [0-9.]*' "$WORK/run$run.calibrated.err" || true)
  echo "$line (knots, $(grep -c . "$WORK/truth.txt") rows; calibrated: $chosen; default: $(calibration)), fits $last, kernel $(kernel 0 | cut -d: -f2)"
  stop
done
