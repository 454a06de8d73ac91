# Sourced by fleet.sh and bench_fleet.sh: fleet_data DIR N ROWS writes DIR/data0.csv ..
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
