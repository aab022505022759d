#!/usr/bin/env bash
# device_all.sh: on the GPU machine, in one call, from the binaries scripts/device_pack.sh built here
# (.carry/): first every check at once (they only need right answers, so they share the GPU), then
# the timed benchmarks one after the other, alone on the GPU. Logs and CSV go to $OUT; at the end
# (or when DEADLINE runs out) everything is also packed into $OUT/device.tgz (the device tool
# returns at most 8 files).
#   (here)   cmake --build --preset default && scripts/device_pack.sh
#   (device) OUT=dir DEADLINE=420 bash scripts/device_all.sh
# Checks (CHECKS, default all but the experiments):
#   gpu_kernels gpu_meta gpu_replay  the kernel and metadata tests, GPU replay against CPU replay
#   gpu_dit                          scripts/gpu_dit.sh check: op table test, PyTorch comparison
#   memcheck racecheck               compute-sanitizer on a GPU replay of every policy
#   memcheck_dit                     compute-sanitizer memcheck on a GPU closed loop (dsgap generate,
#                                    dense and mc-sparse, CFG) of the bundled model: the DiT op table
#   closed_loop                      experiment 4 on the bundled model (experiments/closed_loop.ini;
#                                    fidelity; its times overlap the other checks)
#   demo_gpu                         dsgap demo --device gpu on the bundled model
#   experiments                      dsgap run --device gpu of experiments 1-3 (EXPERIMENTS: a subset)
# Benchmarks (BENCHES, default "bench dit", empty for none; BENCH_REPS 5):
#   bench   dsgap bench --device gpu (kernels, anchor step, layer-step)
#   dit     scripts/gpu_dit.sh bench: Wan2.1-1.3B forward vs PyTorch, 50-step mc-sparse speedup
#   meta    gpu_meta --bench: every version of every metadata kernel at n = 32760, d = 128
# DEADLINE: seconds for the whole script (default 540); a benchmark that would start after it is
# skipped and one that runs into it is stopped. CHECK_CAP (default half of it): each check's limit;
# BENCH_CAP (default 150): dsgap bench's.
set -u
cd "$(dirname "$0")/.."
T0=$SECONDS
OUT=${OUT:-$PWD/device-out}
DEADLINE=${DEADLINE:-540}
mkdir -p "$OUT" /tmp/dglib
tar -C /tmp/dglib -xJf .carry/lib.tar.xz
[ -d .carry/bin ] || tar -C .carry -xJf .carry/bin.tar.xz
CUBLAS_PY=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${CUBLAS_PY:+$CUBLAS_PY:}${LD_LIBRARY_PATH:-}
export DSGAP=$PWD/.carry/bin/dsgap OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OUT
CHECKS=${CHECKS-gpu_kernels gpu_meta gpu_replay gpu_dit memcheck closed_loop demo_gpu}
BENCHES=${BENCHES-bench dit}
S=$OUT/summary.txt
{
  echo "device_all.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(cat .carry/COMMIT 2>/dev/null)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used --format=csv
} | tee "$S"
pack() { tar -C "$OUT" -czf /tmp/device.tgz --exclude device.tgz . && mv /tmp/device.tgz "$OUT/"; }
trap pack EXIT
run() { # name timeout command...: one step, its output in $OUT/name.log, a line in the summary
	local name=$1 to=$2; shift 2
	local t0=$SECONDS
	timeout "$to" "$@" >"$OUT/$name.log" 2>&1
	local rc=$?
	echo "$name: rc=$rc ($((SECONDS - t0)) s): $(grep -E "passed|failed|FAIL|error|ERROR SUMMARY" \
		"$OUT/$name.log" | tail -2 | tr '\n' ' ')" | tee -a "$S"
}
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }
left() { echo $((DEADLINE - (SECONDS - T0))); }
sanitize() { # tool: compute-sanitizer on a GPU replay of every policy (precise and fast attention)
	"$DSGAP" synth --out /tmp/san-$1.h5 --grid 2x10x25 --heads 2 --layers 1 --steps 3 --head-dim 128 \
		--seed 5 >/dev/null && compute-sanitizer --tool "$1" --error-exitcode 9 "$DSGAP" replay \
		/tmp/san-$1.h5 --device gpu --policies all --density 0.2 --schedule warmup=1 \
		--out /tmp/san-$1 --quiet
}
sanitize_dit() { # compute-sanitizer memcheck on dsgap generate --device gpu with the bundled model
	compute-sanitizer --tool memcheck --error-exitcode 9 "$DSGAP" generate --model data/model \
		--text data/model/conds.safetensors:cockatoo --negative data/model/conds.safetensors:null \
		--out /tmp/san-dit --latent 4x32x32 --steps 3 --policies dense,mc-sparse --density 0.3 \
		--schedule warmup=1 --device gpu --quiet && cp /tmp/san-dit/generate.csv "$OUT/sanitize_dit_generate.csv"
}
experiments() { # the bundled traces captured here on the GPU, then experiments 1-3, each timed
	local t0=$SECONDS
	(source experiments/lib.sh && exp_init ladder && DSGAP_DEVICE=gpu exp_bundled_trace &&
		DSGAP_DEVICE=gpu exp_bundled_trace 14) || return 1
	echo "experiments: bundled traces captured in $((SECONDS - t0)) s"
	for x in ${EXPERIMENTS:-ladder ablation refresh}; do
		t0=$SECONDS
		"$DSGAP" run experiments/$x.ini --device gpu --out /tmp/exp/$x --quiet || return 1
		echo "experiments: $x in $((SECONDS - t0)) s"
		mkdir -p "$OUT/experiments/$x" && cp /tmp/exp/$x/summary.* /tmp/exp/$x/*/run.json "$OUT/experiments/$x/" 2>/dev/null
	done
}

export -f sanitize sanitize_dit experiments

# --- checks, all at once --------------------------------------------------------------------------
CAP=${CHECK_CAP:-$(( $(left) / 2 ))}   # each check stops there
has "$CHECKS" gpu_kernels && run gpu_kernels $CAP .carry/bin/gpu_kernels &
has "$CHECKS" gpu_meta && run gpu_meta $CAP .carry/bin/gpu_meta &
has "$CHECKS" gpu_replay && run gpu_replay $CAP bash tests/gpu_replay.sh &
has "$CHECKS" gpu_dit && run dit_check $CAP bash scripts/gpu_dit.sh check &
has " $BENCHES " dit && run dit_prepare $CAP bash scripts/gpu_dit.sh prepare &
for tool in memcheck racecheck; do
	has "$CHECKS" $tool && run sanitize_$tool $CAP bash -c "sanitize $tool" &
done
has "$CHECKS" memcheck_dit && run sanitize_memcheck_dit $CAP bash -c sanitize_dit &
has "$CHECKS" closed_loop && run closed_loop $CAP "$DSGAP" run experiments/closed_loop.ini --device gpu \
	--out "$OUT/closed_loop" --quiet &
has "$CHECKS" demo_gpu && run demo_gpu $CAP "$DSGAP" demo --device gpu --model data/model \
	--out "$OUT/demo_gpu" --quiet &
has "$CHECKS" experiments && run experiments $CAP bash -c experiments &
wait
rm -f "$OUT/demo_gpu/trace.h5"   # 400 MB: not brought back
echo "checks done at $((SECONDS - T0)) s" | tee -a "$S"

# --- benchmarks, one at a time --------------------------------------------------------------------
export OMP_NUM_THREADS=$(nproc)   # alone on the machine: the host's share of a forward on every core
if has "$BENCHES" bench && [ "$(left)" -gt 60 ]; then
	run bench $(( $(left) < ${BENCH_CAP:-150} ? $(left) : ${BENCH_CAP:-150} )) "$DSGAP" bench --device gpu --reps ${BENCH_REPS:-5} \
		--csv "$OUT/bench.csv"
	grep -E "^[a-z_]+(@[0-9.]+)? " "$OUT/bench.log" | tee -a "$S"
fi
if has "$BENCHES" meta && [ "$(left)" -gt 60 ]; then
	run gpu_meta_bench 60 .carry/bin/gpu_meta --bench
	grep -E "^bench" "$OUT/gpu_meta_bench.log" | tee -a "$S"
fi
if has "$BENCHES" dit && [ "$(left)" -gt 90 ]; then
	DIT_GEN_TIMEOUT=${DIT_GEN_TIMEOUT:-$(( $(left) - 75 ))} run dit_bench $(left) bash scripts/gpu_dit.sh bench
	grep -E "^[a-z_0-9.]+,[-0-9.e+naif]+," "$OUT/gpu_dit.csv" | tee -a "$S"
fi
echo "device_all.sh done at $((SECONDS - T0)) s" | tee -a "$S"
