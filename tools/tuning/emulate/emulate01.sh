#!/bin/sh
# Runs the kernels of lab 01's reference steps 3-6 on the CPU (shim.h: a thread per CUDA thread, a barrier per
# __syncthreads, dynamic shared memory per block) on small shapes, misaligned pointers included, against a product in
# double; step 6 in three configurations of its template. No GPU needed; a check of the kernels' indexing, not of
# their speed (step 6's cp.async copies run synchronously). About a minute on 2 cores (mostly thread creation).
# From the repository root: tools/tuning/emulate/emulate01.sh
set -e
here=$(dirname "$0")
sol=solutions/01_matmul
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo '#include "shim.h"'
  echo '#include <stdexcept>'
  for f in step3_tiled:s3 step4_regblock:s4 step5a_transposed_a:s5a step5b_conflict_free:s5b \
           step5c_vector_loads:s5c step5d_double_buffer:s5d step5e_launch_bounds:s5e step5f_tuned:s5f \
           step6_async_pipeline:s6; do
    python3 "$here/extract.py" "$sol/${f%%:*}.cu" "${f##*:}"
  done
} > "$tmp/kernels.h"
cp "$here/shim.h" "$tmp/"
g++ -std=c++20 -O1 -pthread -Wno-unknown-pragmas -I"$tmp" "$here/emulate01.cpp" -o "$tmp/emulate01"
"$tmp/emulate01"
