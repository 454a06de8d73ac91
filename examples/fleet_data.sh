# Sourced by the example scripts (fleet.sh, faults_nodes.sh, wind_nodes.sh, bench_fleet.sh). fleet_data DIR N ROWS writes DIR/data0.csv ..
# DIR/data{N-1}.csv, ROWS rows each of y = sin(x1) + 0.5 x2 + noise (awk only, seeded per node).
fleet_data() {
  local dir=$1 n=$2 rows=$3 i
  for i in $(seq 0 $((n - 1))); do
    awk -v seed=$((i + 1)) -v n="$rows" 'BEGIN {
      srand(seed); print "x1,x2,y";
      for (k = 0; k < n; k++) {
        x1 = 4 * rand() - 2; x2 = 4 * rand() - 2;
        printf "%.6f,%.6f,%.6f\n", x1, x2, sin(x1) + 0.5 * x2 + 0.1 * (rand() - 0.5)
      }
    }' > "$dir/data$i.csv"
  done
}

# fleet_security TLS COOLGP FLEET N PKI sets SCHEME (tcp, or tls) and the array SEC (empty, or
# --tls PKI); with TLS = 1 it first writes the fleet's certificates for nodes 0..N-1 into PKI.
fleet_security() {
  SCHEME=tcp
  SEC=()
  if [ "$1" = 1 ]; then
    "$2" certs --fleet "$3" --nodes "$(seq -s, 0 $(($4 - 1)))" --out "$5" > /dev/null
    SCHEME=tls
    SEC=(--tls "$5")
  fi
}

# networked_coolgp ROOT sets COOLGP (default ROOT/target/release/coolgp) and, if that binary
# lacks the networked commands, builds it (release, --features node).
networked_coolgp() {
  COOLGP=${COOLGP:-$1/target/release/coolgp}
  if ! "$COOLGP" node --help > /dev/null 2>&1; then
    echo "building coolgp with the networked commands (release, --features node) ..." >&2
    (cd "$1" && cargo build --release -p coolgp-cli --features node)
  fi
}
