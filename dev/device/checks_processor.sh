#!/bin/bash
# checks_processor.sh: a change to the DiT entry point or the sparse kernel's loads checked, then measured through
# diffusers, in one device call: gpu_kernels --quick, gpu_api (libdsgap's GPU ABI against its CPU ABI) and gpu_dit
# at once; then, if all pass, the processor benchmark (PARTS, default overhead and Wan2.1-1.3B 480p 50 steps)
# alone on the GPU (scripts/device_python.sh). Carry .carry (scripts/device_pack.sh) and .whl. SWEEP_UNTIL=S then
# runs the length sweep at 12 heads (scripts/device_all.sh STEPS=length into $OUT/len) until S seconds from the start.
# With dsgap-bench-kernels in the carry, its --quick lines (dense; the sparse call on head-major and on token-major
# inputs) and cuDNN's in the same call (scripts/gpu_bench_torch.py) come before the benchmark; PARTS=none: no benchmark. $OUT/checks.tgz holds the checks' and the benchmark's files (a device call returns at most 8 files).
#   (device) OUT=dir [PARTS=overhead,wan] [PROCESSOR_CAP=330] [SWEEP_UNTIL=580] bash dev/device/checks_processor.sh
set -u
cd "$(dirname "$0")/../.." || exit 2
T0=$SECONDS
. dev/device/carry_env.sh
echo "card: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(date -u +%FT%TZ) commit $(cat .carry/COMMIT); cores $(nproc)"
(timeout 150 $B/gpu_kernels --quick > $OUT/gpu_kernels.log 2>&1; echo "gpu_kernels rc=$? ($((SECONDS-T0)) s)") &
(OMP_NUM_THREADS=4 timeout 150 $B/gpu_api > $OUT/gpu_api.log 2>&1; echo "gpu_api rc=$? ($((SECONDS-T0)) s)") &
(python3 -B tests/wan_ref.py derive tests/fixtures/wan /tmp/wan_models > $OUT/gpu_dit.log 2>&1 && OMP_NUM_THREADS=4 timeout 150 $B/gpu_dit /tmp/wan_models tests/fixtures/wan >> $OUT/gpu_dit.log 2>&1; echo "gpu_dit rc=$? ($((SECONDS-T0)) s)") &
wait
ok=1
for t in gpu_kernels gpu_api gpu_dit; do echo "== $t"; grep -E "FAIL|passed|failed|token-major|direct" $OUT/$t.log | tail -5; grep -q " 0 failed" $OUT/$t.log || ok=0; done
if [ $ok = 1 ] && [ -x $B/dsgap-bench-kernels ]; then # dense, the sparse call on head- and token-major inputs; cuDNN
  timeout 60 $B/dsgap-bench-kernels --quick --reps 10 --csv $OUT/bench_kernels.csv > $OUT/bench_kernels.log 2>&1
  grep -E "^(dense_ms|dense_tflops|sparse_ms@0.15|sparse_heads|sparse_token_major)" $OUT/bench_kernels.log
  timeout 60 python3 scripts/gpu_bench_torch.py --n 32760 --heads 12 --d 128 --reps 10 --densities 0.15 \
    --ours $OUT/bench_kernels.csv --csv $OUT/torch.csv > $OUT/torch.log 2>&1
  grep -E "^(cudnn_ms|cudnn_tflops|dense_over_cudnn|sparse_over_cudnn@0.15)," $OUT/torch.csv
fi
if [ $ok = 1 ] && [ "${PARTS:-}" != none ]; then
  BENCHES=processor PARTS=${PARTS:-overhead,wan} PROCESSOR_CAP=${PROCESSOR_CAP:-330} OUT=$OUT bash scripts/device_python.sh
else
  echo "checks failed: no benchmark"
fi
L=$((${SWEEP_UNTIL:-0} - (SECONDS - T0)))
if [ $L -gt 150 ] && [ -x $B/dsgap ]; then
  echo "length sweep: $L s"
  STEPS=length LENGTH_HEADS=12 LENGTH_DIT_CAP=150 LENGTH_BACKEND_CAP=70 DEADLINE=$L OUT=$OUT/len bash scripts/device_all.sh | tail -12
fi
(cd $OUT && tar -czf /tmp/checks.tgz --exclude len . && find . -mindepth 1 -maxdepth 1 ! -name len -exec rm -rf {} + && mv /tmp/checks.tgz .)
echo "end $((SECONDS-T0)) s $(date -u +%FT%TZ)"
