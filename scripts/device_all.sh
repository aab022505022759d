#!/usr/bin/env bash
# device_all.sh: on the GPU machine, in one call: every GPU test (kernels, metadata kernels, GPU replay
# against CPU replay), compute-sanitizer memcheck/racecheck on a GPU replay, and `dsgap bench`, all from
# the binaries scripts/device_pack.sh built here and put in .carry/. Logs and CSV go to $OUT.
# SANITIZERS="memcheck racecheck" adds racecheck (the kernels alone: scripts/gpu_run.sh).
#   (here)   cmake --build --preset default && scripts/device_pack.sh
#   (device) OUT=dir bash scripts/device_all.sh [--no-bench] [--no-sanitize]
#   STEPS="gpu_meta gpu_replay" picks among the tests (default: all three); BENCH_REPS (default 5).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT" /tmp/dglib
tar -C /tmp/dglib -xJf .carry/lib.tar.xz
export LD_LIBRARY_PATH=/tmp/dglib/lib:${LD_LIBRARY_PATH:-}
export DSGAP=$PWD/.carry/bin/dsgap OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-16}
BENCH=1 SAN=1
for a in "$@"; do
  case $a in --no-bench) BENCH=0 ;; --no-sanitize) SAN=0 ;; *) echo "unknown option $a" >&2; exit 2 ;; esac
done
S=$OUT/summary.txt
{
  echo "device_all.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(cat .carry/COMMIT 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv
} | tee "$S"
run() { # name timeout command...
  local name=$1 to=$2; shift 2
  local t0=$SECONDS
  timeout "$to" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - t0)) s): $(grep -E "passed|failed|FAIL|error" "$OUT/$name.log" | tail -2 | tr '\n' ' ')" | tee -a "$S"
}
want() { case " ${STEPS:-gpu_kernels gpu_meta gpu_replay} " in *" $1 "*) return 0 ;; esac; return 1; }
want gpu_kernels && run gpu_kernels 75 .carry/bin/gpu_kernels
want gpu_meta && run gpu_meta 75 .carry/bin/gpu_meta
want gpu_replay && run gpu_replay 150 bash tests/gpu_replay.sh
if [ $SAN = 1 ]; then
  "$DSGAP" synth --out /tmp/san.h5 --grid 2x10x25 --heads 2 --layers 1 --steps 3 --head-dim 128 --seed 5 >/dev/null
  for tool in ${SANITIZERS:-memcheck}; do
    run "sanitize_$tool" 90 compute-sanitizer --tool $tool --error-exitcode 9 "$DSGAP" replay /tmp/san.h5 \
      --device gpu --policies all --density 0.2 --schedule warmup=1 --out /tmp/san-$tool --quiet
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|hazard" "$OUT/sanitize_$tool.log" | tail -2 | tee -a "$S"
  done
fi
if [ $BENCH = 1 ]; then
  run bench 150 "$DSGAP" bench --device gpu --reps ${BENCH_REPS:-5} --csv "$OUT/bench.csv"
  grep -E "^[a-z_]+(@[0-9.]+)? " "$OUT/bench.log" | tee -a "$S"
fi
