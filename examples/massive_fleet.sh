#!/usr/bin/env bash
# A massive fleet on one machine (issue 31): HOSTS `coolgp host` processes × PER agents each
# (default 10 × 100 = 1,000 agents), on airline rows routed by region (k-means over
# dep_time,distance: `coolgp export --regions`), fused on a 4-ary tree of the agents, hosts
# meshed over 127.0.0.1. It waits until every agent holds the fleet's points (one
# `status --all` request per look), then measures and prints:
#   - memory: each host's resident set, per agent;
#   - idle cost: the hosts' CPU over IDLE_S seconds, SETTLE_S seconds after convergence (the
#     back-offs settle) (% of one core);
#   - queries: `query --all --route 8` and `--route 0` (every agent) on 1,000 test rows: wall
#     time and RMSE (delay minutes), and the default --route;
#   - with CRASH=1: host 1 killed with -9 mid-stream and restarted; every agent must resume.
#
# Usage:   examples/massive_fleet.sh [HOSTS] [PER]
# Env:     COOLGP     the binary (default: target/release/coolgp, built with --features node)
#          BASE_PORT  first listen port (default 7800; host h listens on BASE_PORT + h)
#          ROWS       training rows per agent (default 250)
#          ROUND_MS   round period (default 1000)
#          IDLE_S     seconds of idle measurement (default 30)
#          RESEND     rounds between resends of an unchanged tree message (default 20)
#          CKPT       rounds between lease checkpoints of an agent with nothing new (default 100)
#          SETTLE_S   seconds between convergence and the idle measurement (default 240: the
#                     member readings back off from every 2 to every 64 rounds, 126 rounds in all)
#          CRASH=1    kill -9 host 1 mid-stream and restart it
#          KEYS       extra top-level lines for every host file, e.g. 'local-fit = "agent"'
#          KEEP=1     leave the hosts running
#          WRAP_HOST, WRAP  run the hosts listed in WRAP_HOST under the command WRAP, %h their
#                     number (e.g. WRAP_HOST='3 7' WRAP='heaptrack -o /tmp/ht%h')
set -euo pipefail

HOSTS=${1:-10}
PER=${2:-100}
N=$((HOSTS * PER))
BASE_PORT=${BASE_PORT:-7800}
ROWS=${ROWS:-250}
ROUND_MS=${ROUND_MS:-1000}
IDLE_S=${IDLE_S:-30}
FLEET=${FLEET:-massive}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=examples/fleet_data.sh
. "$ROOT/examples/fleet_data.sh"
networked_coolgp "$ROOT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/coolgp-massive.XXXXXX")
stop() {
  if [ "${KEEP:-0}" != 1 ] && [ -f "$WORK/pids" ]; then
    kill -TERM $(cat "$WORK/pids") 2>/dev/null || true
    wait 2>/dev/null || true
  fi
  echo "logs and data: $WORK" >&2
}
trap stop EXIT
t_start=$(date +%s)

# 1. The split: one CSV per region (agent), the query rows and their targets.
"$COOLGP" export --dataset airline --regions dep_time,distance --agents "$N" \
  --max-train $((N * ROWS)) --max-test 1000 --out "$WORK/split" > /dev/null
mkdir -p "$WORK/data"
# (Files closed after each row: a thousand would exceed awk's open files; >> keeps what is in.)
awk -F, -v dir="$WORK/data" 'NR == 1 { next } { f = dir "/" $10 ".csv";
  if (!(f in seen)) { print "x0,x1,x2,x3,x4,x5,x6,x7,y" > f; seen[f] = 1 }
  print $1 "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 "," $8 "," $9 >> f; close(f) }' "$WORK/split/train.csv"
awk -F, 'NR <= 1001 { print $1 "," $2 "," $3 "," $4 "," $5 "," $6 "," $7 "," $8 }' \
  "$WORK/split/test.csv" > "$WORK/query.csv"
awk -F, 'NR > 1 && NR <= 1001 { print $9 }' "$WORK/split/test.csv" > "$WORK/truth.txt"
Y_SCALE=$(grep -o '"y_scale": [0-9.eE+-]*' "$WORK/split/split.json" | awk '{print $2}')
# A region the k-means left empty has no file: its agent gets a header only.
for a in $(seq 0 $((N - 1))); do
  [ -f "$WORK/data/$a.csv" ] || echo "x0,x1,x2,x3,x4,x5,x6,x7,y" > "$WORK/data/$a.csv"
done
TOTAL=$(( $(cat "$WORK"/data/*.csv | wc -l) - N ))
echo "split: $N agents, $TOTAL training rows ($(( $(date +%s) - t_start )) s)" >&2

# 2. One host file per host: agent a's neighbours on the 4-ary tree (parent (a-1)/4).
for h in $(seq 0 $((HOSTS - 1))); do
  f="$WORK/host$h.toml"
  connect=""
  for g in $(seq 0 $((h - 1))); do connect="$connect\"tcp/127.0.0.1:$((BASE_PORT + g))\", "; done
  {
    echo "fleet = \"$FLEET\""
    echo "target = \"y\""
    echo "inducing = 50"
    echo "batch = 20"
    echo "round-ms = $ROUND_MS"
    # A converged fleet resends an unchanged message every 20 rounds (a node that rejoins
    # is sent it at once), and writes its lease checkpoint every 100 rounds.
    echo "resend-every = ${RESEND:-20}"
    echo "checkpoint-every = ${CKPT:-100}"
    if [ -n "${KEYS:-}" ]; then echo "$KEYS"; fi
    echo "listen = [\"tcp/127.0.0.1:$((BASE_PORT + h))\"]"
    if [ -n "$connect" ]; then echo "connect = [${connect%, }]"; fi
  } > "$f"
  for a in $(seq $((h * PER)) $((h * PER + PER - 1))); do
    nb=""
    if [ "$a" -gt 0 ]; then nb="$(( (a - 1) / 4 ))"; fi
    for c in $((4 * a + 1)) $((4 * a + 2)) $((4 * a + 3)) $((4 * a + 4)); do
      if [ "$c" -lt "$N" ]; then nb="${nb:+$nb, }$c"; fi
    done
    printf '\n[[agent]]\nid = %d\ndata = "%s"\nstate = "%s"\nneighbors = [%s]\n' \
      "$a" "$WORK/data/$a.csv" "$WORK/state/$a" "$nb" >> "$f"
  done
done

start_host() {
  # WRAP_HOST='3 7' WRAP='heaptrack -o /tmp/ht%h': hosts 3 and 7 run under a wrapper (a
  # profiler); %h is the host's number.
  local wrap=()
  case " ${WRAP_HOST:-} " in *" $1 "*) read -r -a wrap <<< "${WRAP//%h/$1}" ;; esac
  "${wrap[@]}" "$COOLGP" host "$WORK/host$1.toml" > "$WORK/host$1.log" 2>&1 &
  echo $! > "$WORK/pid$1"
  echo $! >> "$WORK/pids"
}
for h in $(seq 0 $((HOSTS - 1))); do start_host "$h"; done
connects=()
for h in $(seq 0 $((HOSTS - 1))); do connects+=(--connect "tcp/127.0.0.1:$((BASE_PORT + h))"); done
brief() { "$COOLGP" status --all --fleet "$FLEET" "${connects[@]}" --timeout-ms 8000 2>/dev/null || true; }
# A number of the fleet's aggregates (the "fleet" object of `status --all`).
# (Empty when a look got no answer: the loop goes on rather than `set -e` ending the run.)
field() { { tr -d '\n ' | grep -o '"fleet":{[^}]*}' | grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; } || true; }

if [ "${CRASH:-0}" = 1 ] && [ "$HOSTS" -gt 1 ]; then
  # Mid-stream: once host 1's agents have acknowledged some blocks but not all.
  for _ in $(seq 1 600); do
    p=$(brief | field points); [ -n "$p" ] && [ "$p" -gt $((TOTAL / 4)) ] && break; sleep 1
  done
  kill -9 "$(cat "$WORK/pid1")"
  echo "killed host 1 (agents $PER..$((2 * PER - 1))) at $p acknowledged points; restarting" >&2
  sleep 1
  start_host 1
fi

# 3. Converged: every agent answered, its stream ended and its fused model holds every point.
t0=$(date +%s)
for _ in $(seq 1 3600); do
  b=$(brief)
  agents=$(echo "$b" | field agents); every=$(echo "$b" | field agents_with_every_point)
  ended=$(echo "$b" | field streams_ended); points=$(echo "$b" | field points)
  echo "  $(date +%T) agents $agents, streams ended ${ended:-0}, holding every point ${every:-0}, points ${points:-0}/$TOTAL" >&2
  [ "${agents:-0}" = "$N" ] && [ "${every:-0}" = "$N" ] && [ "${ended:-0}" = "$N" ] && [ "${points:-0}" = "$TOTAL" ] && break
  sleep 5
done
echo "converged: $(( $(date +%s) - t0 )) s after the start of the wait ($(( $(date +%s) - t_start )) s in all)"
echo "$b" > "$WORK/brief.json"

# 4. Memory per agent and idle CPU (clock ticks of the hosts over IDLE_S seconds).
rss=0
for h in $(seq 0 $((HOSTS - 1))); do
  r=$(awk '/VmRSS/ {print $2}' "/proc/$(cat "$WORK/pid$h")/status"); rss=$((rss + r))
done
echo "memory: $((rss / 1024)) MB resident over $HOSTS hosts, $(awk -v r="$rss" -v n="$N" 'BEGIN { printf "%.2f", r / 1024 / n }') MB per agent"
ticks() {
  t=0
  for h in $(seq 0 $((HOSTS - 1))); do
    s=$(awk '{print $14 + $15}' "/proc/$(cat "$WORK/pid$h")/stat"); t=$((t + s))
  done
  echo "$t"
}
sleep ${SETTLE_S:-240}
a=$(ticks); sleep "$IDLE_S"; z=$(ticks)
hz=$(getconf CLK_TCK)
echo "idle: $(awk -v d=$((z - a)) -v hz="$hz" -v s="$IDLE_S" 'BEGIN { printf "%.1f", 100 * d / hz / s }')% of one core over ${IDLE_S} s (all $HOSTS hosts)"

# 5. The fleet query, routed and asking every agent.
for k in 8 0 default; do
  flags=(--route "$k"); [ "$k" = default ] && flags=()
  s=$(date +%s.%N)
  "$COOLGP" query "${connects[@]}" --fleet "$FLEET" --all "${flags[@]}" --input "$WORK/query.csv" \
    --timeout-ms 60000 > "$WORK/query.$k.csv" 2> "$WORK/query.$k.err"
  e=$(date +%s.%N)
  rmse=$(tail -n +2 "$WORK/query.$k.csv" | cut -d, -f1 | paste -d, - "$WORK/truth.txt" |
    awk -F, -v s="$Y_SCALE" '{ d = $1 - $2; t += d * d; n++ } END { printf "%.3f", sqrt(t / n) * s }')
  echo "query --all --route $k: $(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.2f", b - a }') s for 1000 rows, RMSE $rmse min ($(grep -o 'routed:.*' "$WORK/query.$k.err" | head -1))"
done
