# shellcheck shell=bash
# Sourced by scripts/ci_browser.sh and scripts/dashboard_screenshot.sh. Expects $COOLGP (the
# binary) and $RUN (a scratch directory; fleets started by examples/fleet.sh with
# TMPDIR=$RUN KEEP=1 leave their pids under it).

DASH_PIDS=()

# start_dashboard NAME ARGS...: `coolgp dashboard ARGS` on a free loopback port, logging to
# $RUN/dash-NAME.log; sets $url to its address.
start_dashboard() {
  local name=$1
  shift
  url=""
  : > "$RUN/dash-$name.log" # exists before the background process opens it
  "$COOLGP" dashboard --listen 127.0.0.1:0 "$@" > "$RUN/dash-$name.log" 2>&1 &
  DASH_PIDS+=($!)
  for _ in $(seq 1 100); do
    url=$(grep -o 'url=http://[0-9.:]*/' "$RUN/dash-$name.log" | head -1 | cut -d= -f2) || true
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  cat "$RUN/dash-$name.log" >&2
  return 1
}

# stop_all: stops the dashboards and the fleets started under $RUN, then removes $RUN.
stop_all() {
  local p f
  for p in "${DASH_PIDS[@]}"; do
    kill -TERM "$p" 2> /dev/null || true
  done
  for f in "$RUN"/coolgp-fleet.*/pids; do
    if [ -f "$f" ]; then
      xargs kill -TERM < "$f" 2> /dev/null || true
    fi
  done
  wait 2> /dev/null || true
  rm -rf "$RUN"
}
