#!/usr/bin/env bash
# gpu_run.sh: everything GPU in one go, on the GPU machine (H200, CUDA 13.0, cmake 4): build the kernels,
# the GPU test and the benchmark standalone (kernels/CMakeLists.txt, no HDF5/GSL needed), run the test,
# compute-sanitizer memcheck, racecheck and synccheck on the test (--quick sizes), our benchmark, then the
# PyTorch baselines (cuDNN SDPA, FlexAttention) with the side-by-side ratios. Logs and CSV go to $OUT.
#   OUT=dir DG_COMMIT=hash bash scripts/gpu_run.sh [--no-sanitize] [--no-bench] [--no-torch] [--quick-bench]
# env: DG_BUDGET (s, default 560) bounds the whole script (sanitizers get what is left);
#      DG_SAN_WATCHDOG_S (default 150) is the test's per-launch watchdog under compute-sanitizer;
#      a run's inputs are reproduced with DG_SEED=<the "# seed" it printed> build-k/gpu_kernels [--quick].
# Files: summary.txt (device, step results, headline numbers), build.log, test.log, sanitizer.log,
# bench.log, torch.log, bench.csv (name,value,unit,device,date,commit; ours + PyTorch + ratios).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export DG_COMMIT=${DG_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
SAN=1 BENCH=1 TORCH=1 QB=""
for a in "$@"; do
	case $a in
	--no-sanitize) SAN=0 ;;
	--no-bench) BENCH=0 ;;
	--no-torch) TORCH=0 ;;
	--quick-bench) QB=--quick ;;
	*) echo "gpu_run.sh: unknown option $a" >&2; exit 2 ;;
	esac
done
S="$OUT/summary.txt"
say() { echo "== $*" | tee -a "$S"; }
step() { # name, timeout, command...: run, log the exit status and the seconds taken
	local name=$1 to=$2; shift 2
	local t0=$SECONDS
	timeout "$to" "$@"
	local rc=$?
	say "$name: rc=$rc, $((SECONDS - t0)) s"
	return $rc
}
: >"$S"
say "gpu_run.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $DG_COMMIT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,memory.used \
	--format=csv 2>&1 | tee -a "$S"
nvcc --version | tail -2 | tee -a "$S"

step build 400 bash -c "cmake -S kernels -B build-k -DCMAKE_BUILD_TYPE=Release -DDSGAP_GIT_COMMIT=$DG_COMMIT \
	-DDG_KERNELS_ONLY='flash_fwd;sparse_fwd' && \
	cmake --build build-k -j 16 -- VERBOSE=0" >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
grep -E "spill|registers|C75" "$OUT/build.log" | sort | uniq -c | sort -rn | head -8 | tee -a "$S"

cuobjdump --dump-sass build-k/libdsgapkernels.a 2>/dev/null | awk '
	/Function :/ { if (f) printf "%-70s HGMMA %4d  LDL/STL %3d  SETMAXREG %d\n", f, h, l, r; f = $3; h = l = r = 0 }
	/HGMMA/ { h++ } /LDL|STL/ { l++ } /SETMAXREG/ { r++ }
	END { if (f) printf "%-70s HGMMA %4d  LDL/STL %3d  SETMAXREG %d\n", f, h, l, r }' >>"$OUT/build.log"

step test 150 build-k/gpu_kernels >"$OUT/test.log" 2>&1
grep -E "^FAIL|passed|device|^# seed" "$OUT/test.log" | head -40 | tee -a "$S"

if [ $BENCH = 1 ]; then
	rm -f "$OUT/bench.csv"
	step bench 200 build-k/dsgap-bench-kernels $QB --csv "$OUT/bench.csv" >"$OUT/bench.log" 2>&1
	if [ $TORCH = 1 ]; then
		PYTHONUNBUFFERED=1 step torch 240 python3 scripts/gpu_bench_torch.py --ours "$OUT/bench.csv" \
			--csv "$OUT/bench.csv" >"$OUT/torch.log" 2>&1
		grep -v "^[a-z_0-9]*[,@]" "$OUT/torch.log" | tail -5 >>"$S"
	fi
	say "headline numbers"
	grep -E "^(dense_tflops|cudnn_tflops|torch_fa2|dense_over_cudnn|sparse_over_cudnn@0.15|sparse_over_dense@0.15|flex_over_cudnn@0.15|sparse_over_flex@0.15|sparse_eff_tflops@0.15|sparse_block_over_cudnn|sparse_query)" \
		"$OUT/bench.csv" | cut -d, -f1-3 | tee -a "$S"
fi

# sanitizers last, inside what is left of a ~560 s budget (DG_BUDGET) for the whole script
if [ $SAN = 1 ]; then
	: >"$OUT/sanitizer.log"
	for tool in memcheck racecheck synccheck; do
		left=$(( ${DG_BUDGET:-560} - SECONDS ))
		if [ $left -lt 20 ]; then say "sanitizer $tool: skipped, no time left"; continue; fi
		echo "##### compute-sanitizer --tool $tool build-k/gpu_kernels --quick" >>"$OUT/sanitizer.log"
		# the tools slow kernels 10-1000x (racecheck most), so the test's per-launch watchdog is longer here
		DG_WATCHDOG_S=${DG_SAN_WATCHDOG_S:-150} step "sanitizer $tool" $(( left < 200 ? left : 200 )) \
			compute-sanitizer --tool $tool --error-exitcode 3 build-k/gpu_kernels --quick >>"$OUT/sanitizer.log" 2>&1
		grep -E "^# seed" "$OUT/sanitizer.log" | tail -1 | tee -a "$S"
		grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|HANG" "$OUT/sanitizer.log" | tail -3 | tee -a "$S"
	done
fi
say "done"
