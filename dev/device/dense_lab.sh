#!/bin/bash
# dense_lab.sh: the dense kernel's numbered versions (dev/kernels/flash_fwd_v.cu) checked, then timed beside
# cuDNN SDPA, in one device call: gpu_kernels_dev --quick --version V for each of VERSIONS (fp64 reference,
# both P.V modes, d 64 and 128), then ROUNDS rounds of dsgap-bench-kernels-dev --dense (every dense version,
# bf16 output + LSE) and scripts/gpu_bench_torch.py (cuDNN, same shape) back to back at each SHAPE
# (n:heads:d), and a table of each version's TFLOP/s over cuDNN's of the same round. From the binaries of a
# -DDSGAP_DEV_KERNELS=ON build packed into .carry/bin.tar.xz (gpu_kernels_dev, dsgap-bench-kernels-dev).
#   (device) OUT=dir [VERSIONS="6 7 8"] [ROUNDS=2] [SHAPES="32760:12:128 75600:12:128 32760:24:64"] bash dev/device/dense_lab.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
T0=$SECONDS
. dev/device/carry_env.sh
echo "card: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(date -u +%FT%TZ) commit $DG_COMMIT"
ok=1
for v in ${VERSIONS:-6 7 8}; do
  timeout 120 $B/gpu_kernels_dev --quick --version $v > $OUT/gpu_kernels_dev_v$v.log 2>&1
  echo "gpu_kernels_dev v$v rc=$? ($((SECONDS-T0)) s): $(grep -E "passed|failed" $OUT/gpu_kernels_dev_v$v.log | tail -1)"
  grep -q " 0 failed" $OUT/gpu_kernels_dev_v$v.log || { ok=0; grep FAIL $OUT/gpu_kernels_dev_v$v.log | head -5; }
done
[ $ok = 1 ] || { echo "checks failed: no timing"; exit 1; }
for r in $(seq 1 ${ROUNDS:-2}); do
  for sh in ${SHAPES:-32760:12:128 75600:12:128 32760:24:64}; do
    IFS=: read -r n h d <<< "$sh"
    f=$OUT/round$r-$n-$h-$d
    timeout 120 $B/dsgap-bench-kernels-dev --dense --n $n --heads $h --d $d --reps 10 --csv $f-ours.csv > $f-ours.log 2>&1
    timeout 120 python3 scripts/gpu_bench_torch.py --n $n --heads $h --d $d --reps 10 --densities 0.15 \
      --csv $f-torch.csv > $f-torch.log 2>&1
    c=$(awk -F, '$1=="cudnn_tflops"{print $2}' $f-torch.csv)
    awk -F, -v c="$c" -v sh="$sh" -v r=$r 'BEGIN{printf "round %d %s: cuDNN %.0f TFLOP/s;", r, sh, c}
      $1=="dense_tflops" || $1 ~ /^dense_tflops_v/ {printf " %s %.0f (%.3fx)", substr($1,14)==""?"promoted":substr($1,14), $2, $2/c}
      END{print ""}' $f-ours.csv
  done
done
echo "end $((SECONDS-T0)) s $(date -u +%FT%TZ)"
