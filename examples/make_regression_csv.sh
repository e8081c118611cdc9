#!/bin/sh
# Writes the CSV regression example's data: y = 3 x1 - 2 x2 + 0.5 x3 + 1 + noise (sd 0.1), with
# x1..x3 uniform in [-1, 1]; 800 training rows and 200 evaluation rows, seeded (awk's srand).
#   examples/make_regression_csv.sh /tmp/regression      # writes train.csv and eval.csv there
set -eu
dir=${1:-/tmp/regression}
mkdir -p "$dir"
gen() {   # rows seed
  awk -v n="$1" -v seed="$2" 'BEGIN {
    srand(seed); print "x1,x2,x3,y";
    for (i = 0; i < n; i++) {
      x1 = 2 * rand() - 1; x2 = 2 * rand() - 1; x3 = 2 * rand() - 1;
      # Box-Muller noise
      u = rand(); v = rand(); if (u < 1e-12) u = 1e-12;
      e = 0.1 * sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
      printf "%.6f,%.6f,%.6f,%.6f\n", x1, x2, x3, 3 * x1 - 2 * x2 + 0.5 * x3 + 1 + e;
    } }'
}
gen 800 1 > "$dir/train.csv"
gen 200 2 > "$dir/eval.csv"
echo "wrote $dir/train.csv and $dir/eval.csv"
