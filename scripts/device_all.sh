#!/usr/bin/env bash
# device_all.sh: the one runner on the GPU machine. In one device call, from the binaries that
# scripts/device_pack.sh built here (.carry/: dsgap, the GPU tests, dsgap-bench-kernels and the
# shared libraries the GPU machine lacks: GSL, OpenBLAS, HDF5, cJSON, inih), it runs the selected
# checks all at once (they only need right answers, so they share the GPU), then the selected
# benchmarks one after the other, alone on the GPU. Logs and CSVs go to $OUT; at the end (or when
# DEADLINE runs out) everything is also packed into $OUT/device.tgz (the device tool returns at
# most 8 files: where $OUT holds more than 7, only device.tgz and summary.txt are left there).
#   (here)   cmake --build --preset default && scripts/device_pack.sh
#   (device) OUT=dir [DEADLINE=540] [CHECKS=...] [BENCHES=...] [STEPS=...] bash scripts/device_all.sh
#            with carry [".carry"]; --help prints this header, --list the steps a call would run.
# Checks (CHECKS, default "gpu_kernels gpu_meta gpu_replay gpu_dit gpu_api gpu_cache memcheck closed_loop demo_gpu
# sass"):
#   gpu_kernels gpu_meta gpu_replay  the kernel and metadata tests, GPU replay against CPU replay (the
#                                    staleness switches fresh= and a sparse_steps window included)
#   gpu_meta_peers                   gpu_meta --peers: the peers' device metadata alone (in gpu_meta too)
#   gpu_api                          libdsgap's C ABI on the GPU against its CPU ABI (tests/api/gpu_api.c)
#   gpu_cache                        the GPU's cache storage (residual_dtype, keys=bitmap) against the
#                                    CPU twin, bit for bit, and --cache-offload bit-identical to the
#                                    run without (backend and closed loop; tests/backend/gpu_cache.c)
#   gpu_dit                          scripts/gpu_dit.sh check: op table test, PyTorch comparison
#   memcheck racecheck               compute-sanitizer on a GPU replay of every policy (with and
#                                    without a text prefix)
#   memcheck_dit                     compute-sanitizer memcheck on a GPU closed loop (dsgap generate,
#                                    dense and mc-sparse, CFG) of the bundled model: the DiT op table
#   kernels_memcheck kernels_racecheck kernels_synccheck
#                                    compute-sanitizer on gpu_kernels --quick (its per-launch
#                                    watchdog DG_SAN_WATCHDOG_S, default 150 s, under the tools)
#   meta_memcheck                    compute-sanitizer memcheck on gpu_meta --tiny
#   sass                             per kernel of the carried binaries: HGMMA, LDL/STL (spills) and
#                                    SETMAXREG instructions (cuobjdump) -> sass.log
#   closed_loop                      experiment 4 on the bundled model (experiments/closed_loop.ini;
#                                    fidelity; its times overlap the other checks)
#   demo_gpu                         dsgap demo --device gpu on the bundled model
#   experiments                      each experiment's device path timed (scripts/time_experiments.sh:
#                                    EXPERIMENTS a subset, default all; EXPERIMENT_CAP s each) ->
#                                    $OUT/experiments/times.md
# Benchmarks (BENCHES, default "bench dit", empty for none), in this order:
#   bench    dsgap bench --device gpu (replay backend: dense, anchor step, sparse passes, layer-step;
#            BENCH_REPS 5, at most BENCH_CAP 150 s) -> bench.csv
#   kernels  dsgap-bench-kernels: the dense flash and gather-KV sparse kernels -> kernels.csv
#            (KERNELS_QUICK non-empty: --quick, smaller shapes)
#   torch    scripts/gpu_bench_torch.py (python3 with PyTorch): cuDNN SDPA, FlashAttention-2 and
#            FlexAttention block-sparse, and after `kernels` the side-by-side ratios -> kernels.csv
#   meta     gpu_meta --bench: every version of every metadata kernel at n = 32760, d = 128, and each
#            block peer's metadata call beside its sparse attention and the dense pass ("bench peer")
#   dit      scripts/gpu_dit.sh bench: Wan2.1-1.3B forward vs PyTorch, 50-step mc-sparse speedup
#   length   speed against sequence length (issue 23): cuDNN dense per N x heads (gpu_bench_torch.py
#            --sweep -> cudnn_length.csv), then dsgap callspeed, every policy's call with its metadata
#            amortised: the DiT entry point at LENGTH_HEADS (default 12,24,40; at most LENGTH_DIT_CAP 130 s),
#            the per-head backend in both P.V modes at 12 heads (LENGTH_BACKEND_CAP 80 s; 0: not run) -> callspeed.csv;
#            N = 1k..128k (LENGTH_GRIDS); here: experiments/kernel_speed.sh --length
#   comparison  experiments/comparison.sh --stage gpu (the main comparison: fidelity over the bundled
#            model's samples, speed at the Wan2.1-1.3B architecture; resumable on a warm machine;
#            COMPARISON_ARGS e.g. "--gpus all"; COMPARISON_STAGE=speed: the speed run alone) ->
#            comparison/comparison.tar.gz
# STEPS: one list of checks and benchmarks in place of CHECKS and BENCHES; either may also name the
# groups checks and benches (the defaults), kernel_suite (gpu_kernels kernels_memcheck
# kernels_racecheck kernels_synccheck sass kernels torch: the kernels against cuDNN and
# FlexAttention) and meta_suite (gpu_meta meta_memcheck meta). E.g. STEPS=kernel_suite.
# DEADLINE: seconds for the whole script (default 540); a benchmark that would start after it is
# skipped and one that runs into it is stopped. CHECK_CAP (default half of it): each check's limit.
# $OUT: summary.txt (device, one line per step, headline numbers), STEP.log per step, bench.csv and
# kernels.csv (lines name,value,unit,device,date,commit; DG_COMMIT = .carry/COMMIT for the kernels),
# gpu_dit.csv, generate.{csv,json}, device.tgz. gpu_kernels prints "# seed S": DG_SEED=S reproduces
# its inputs.
set -u
cd "$(dirname "$0")/.." || exit 2

DEFAULT_CHECKS="gpu_kernels gpu_meta gpu_replay gpu_dit gpu_api gpu_cache memcheck closed_loop demo_gpu sass"
DEFAULT_BENCHES="bench dit"
ALL_CHECKS="gpu_kernels gpu_meta gpu_meta_peers gpu_replay gpu_dit gpu_api gpu_cache memcheck racecheck memcheck_dit kernels_memcheck \
kernels_racecheck kernels_synccheck meta_memcheck sass closed_loop demo_gpu experiments"
ALL_BENCHES="bench kernels torch meta dit length comparison"
expand() { # step and group names -> step names
	local s
	for s in "$@"; do
		case $s in
		checks) echo "$DEFAULT_CHECKS" ;;
		benches) echo "$DEFAULT_BENCHES" ;;
		kernel_suite) echo "gpu_kernels kernels_memcheck kernels_racecheck kernels_synccheck sass kernels torch" ;;
		meta_suite) echo "gpu_meta meta_memcheck meta" ;;
		*) echo "$s" ;;
		esac
	done | tr '\n' ' '
}
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }
# shellcheck disable=SC2086  # the lists split on blanks
if [ -n "${STEPS+x}" ]; then
	SEL=$(expand $STEPS)
else
	SEL=$(expand ${CHECKS-$DEFAULT_CHECKS} ${BENCHES-$DEFAULT_BENCHES})
fi
for s in $SEL; do
	has "$ALL_CHECKS $ALL_BENCHES" "$s" || { echo "device_all.sh: unknown step '$s' (checks: $ALL_CHECKS;" \
		"benchmarks: $ALL_BENCHES; groups: checks benches kernel_suite meta_suite)" >&2; exit 2; }
done
case ${1:-} in
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 0 ;;
--list)
	for s in $ALL_CHECKS; do has "$SEL" "$s" && printf 'check %s\n' "$s"; done
	for s in $ALL_BENCHES; do has "$SEL" "$s" && printf 'bench %s\n' "$s"; done
	exit 0 ;;
"") ;;
*) echo "device_all.sh: unknown argument '$1' (--help, --list)" >&2; exit 2 ;;
esac

[ -f .carry/lib.tar.xz ] || { echo "device_all.sh: no .carry/: run scripts/device_pack.sh here and carry .carry" >&2; exit 2; }
T0=$SECONDS
OUT=${OUT:-$PWD/device-out}
DEADLINE=${DEADLINE:-540}
mkdir -p "$OUT" /tmp/dglib
# unpack once per machine: a second unpack under running workers of an earlier step bus-faults them
sum=$(cksum < .carry/lib.tar.xz)
[ "$(cat /tmp/dglib/.packed 2>/dev/null)" = "$sum" ] || { tar -C /tmp/dglib -xJf .carry/lib.tar.xz && echo "$sum" > /tmp/dglib/.packed; }
[ -d .carry/bin ] || tar -C .carry -xJf .carry/bin.tar.xz
CUBLAS_PY=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${CUBLAS_PY:+$CUBLAS_PY:}${LD_LIBRARY_PATH:-}
export PATH=$PATH:/usr/local/cuda/bin
BIN=$PWD/.carry/bin
DG_COMMIT=$(cat .carry/COMMIT 2>/dev/null || echo unknown)
export BIN DSGAP=$BIN/dsgap DG_COMMIT OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} OUT
S=$OUT/summary.txt
{
	echo "device_all.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $DG_COMMIT; steps: $SEL"
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,memory.used \
		--format=csv
	command -v nvcc >/dev/null && nvcc --version | tail -1
} 2>&1 | tee "$S"
# device.tgz holds everything; with more than 6 other entries in $OUT the loose copies go (summary.txt
# stays), so that the tgz is among the at most 8 files a device call returns
pack() {
	tar -C "$OUT" -czf /tmp/device.tgz --exclude device.tgz . && mv /tmp/device.tgz "$OUT/" || return
	[ "$(find "$OUT" -mindepth 1 -maxdepth 1 ! -name device.tgz | wc -l)" -le 6 ] ||
		find "$OUT" -mindepth 1 -maxdepth 1 ! -name device.tgz ! -name summary.txt -exec rm -rf {} +
}
trap pack EXIT
run() { # name timeout command...: one step, its output in $OUT/name.log, a line in the summary
	local name=$1 to=$2; shift 2
	local t0=$SECONDS
	timeout "$to" "$@" >"$OUT/$name.log" 2>&1
	local rc=$?
	echo "$name: rc=$rc ($((SECONDS - t0)) s): $(grep -E "passed|failed|FAIL|error|ERROR SUMMARY|RACECHECK SUMMARY|HANG|^# seed" \
		"$OUT/$name.log" | tail -2 | tr '\n' ' ')" | tee -a "$S"
}
left() { echo $((DEADLINE - (SECONDS - T0))); }
upto() { local l; l=$(left); echo $((l < $1 ? l : $1)); } # the time left, at most $1
sanitize() { # tool: compute-sanitizer on a GPU replay of every policy (precise and fast attention),
	# without and with a text prefix (joint attention)
	local text
	for text in 0 40; do
		"$DSGAP" synth --out "/tmp/san-$1.h5" --grid 2x10x25 --heads 2 --layers 1 --steps 3 --head-dim 128 \
			--text $text --seed 5 >/dev/null && compute-sanitizer --tool "$1" --error-exitcode 9 "$DSGAP" replay \
			"/tmp/san-$1.h5" --device gpu --policies all --density 0.2 --schedule warmup=1 \
			--out "/tmp/san-$1-$text" --quiet || return
	done
}
sanitize_dit() { # compute-sanitizer memcheck on dsgap generate --device gpu with the bundled model
	compute-sanitizer --tool memcheck --error-exitcode 9 "$DSGAP" generate --model data/model \
		--text data/model/conds.safetensors:cockatoo --negative data/model/conds.safetensors:null \
		--out /tmp/san-dit --latent 4x32x32 --steps 3 --policies dense,mc-sparse --density 0.3 \
		--schedule warmup=1 --device gpu --quiet && cp /tmp/san-dit/generate.csv "$OUT/sanitize_dit_generate.csv"
}
sanitize_kernels() { # tool: compute-sanitizer on the kernel test at its small sizes; the tools slow
	# kernels 10-1000x (racecheck most), so the test's per-launch watchdog is longer here
	DG_WATCHDOG_S=${DG_SAN_WATCHDOG_S:-150} compute-sanitizer --tool "$1" --error-exitcode 3 "$BIN/gpu_kernels" --quick
}
sanitize_meta() { # compute-sanitizer memcheck on the metadata test at its smallest size (no "ok" lines)
	compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 "$BIN/gpu_meta" --tiny 2>&1 | grep -v "^ok "
	return "${PIPESTATUS[0]}"
}
sass() { # per kernel: HGMMA (wgmma), LDL/STL (local memory: spills) and SETMAXREG instructions
	local b
	for b in "$DSGAP" "$BIN/dsgap-bench-kernels"; do
		[ -x "$b" ] || continue
		echo "##### $(basename "$b")"
		cuobjdump --dump-sass "$b" | awk '
			/Function :/ { if (f) printf "%-70s HGMMA %4d  LDL/STL %3d  SETMAXREG %d\n", f, h, l, r; f = $3; h = l = r = 0 }
			/HGMMA/ { h++ } /LDL|STL/ { l++ } /SETMAXREG/ { r++ }
			END { if (f) printf "%-70s HGMMA %4d  LDL/STL %3d  SETMAXREG %d\n", f, h, l, r }' || return 1
	done
}
experiments() { # each experiment's device path, timed: a table (scripts/time_experiments.sh)
	# shellcheck disable=SC2086  # EXPERIMENTS: a list
	bash scripts/time_experiments.sh --device gpu --cap "${EXPERIMENT_CAP:-540}" --scratch /tmp/exp \
		--out "$OUT/experiments" ${EXPERIMENTS:-}
}
export -f sanitize sanitize_dit sanitize_kernels sanitize_meta sass experiments

# --- checks, all at once --------------------------------------------------------------------------
CAP=${CHECK_CAP:-$(($(left) / 2))} # each check stops there
has "$SEL" gpu_kernels && run gpu_kernels "$CAP" "$BIN/gpu_kernels" &
has "$SEL" gpu_meta && run gpu_meta "$CAP" "$BIN/gpu_meta" &
has "$SEL" gpu_meta_peers && run gpu_meta_peers "$CAP" "$BIN/gpu_meta" --peers &
has "$SEL" gpu_replay && run gpu_replay "$CAP" bash tests/replay/gpu_replay.sh &
has "$SEL" gpu_cache && run gpu_cache "$CAP" "$BIN/gpu_cache" &
has "$SEL" gpu_dit && run dit_check "$CAP" bash scripts/gpu_dit.sh check &
has "$SEL" dit && run dit_prepare "$CAP" bash scripts/gpu_dit.sh prepare &
for tool in memcheck racecheck; do
	has "$SEL" $tool && run sanitize_$tool "$CAP" bash -c "sanitize $tool" &
done
has "$SEL" memcheck_dit && run sanitize_memcheck_dit "$CAP" bash -c sanitize_dit &
for tool in memcheck racecheck synccheck; do
	has "$SEL" kernels_$tool && run kernels_$tool "$CAP" bash -c "sanitize_kernels $tool" &
done
has "$SEL" meta_memcheck && run meta_memcheck "$CAP" bash -c sanitize_meta &
has "$SEL" sass && run sass "$CAP" bash -c sass &
has "$SEL" closed_loop && run closed_loop "$CAP" "$DSGAP" run experiments/closed_loop.ini --device gpu \
	--out "$OUT/closed_loop" --quiet &
has "$SEL" demo_gpu && run demo_gpu "$CAP" "$DSGAP" demo --device gpu --model data/model \
	--out "$OUT/demo_gpu" --quiet &
has "$SEL" experiments && run experiments "$CAP" bash -c experiments &
wait
# gpu_api's leak check reads the device's memory in use (cudaMemGetInfo: every process's), so it runs
# with the GPU to itself
has "$SEL" gpu_api && run gpu_api "$CAP" "$BIN/gpu_api"
rm -f "$OUT/demo_gpu/trace.h5" # 400 MB: not brought back
echo "checks done at $((SECONDS - T0)) s" | tee -a "$S"

# --- benchmarks, one at a time --------------------------------------------------------------------
OMP_NUM_THREADS=$(nproc) # alone on the machine: the host's share of a forward on every core
export OMP_NUM_THREADS
can() { # step seconds: selected, and more than that many seconds left (else a line saying it is skipped)
	has "$SEL" "$1" || return 1
	[ "$(left)" -gt "$2" ] && return 0
	echo "$1: skipped, $(left) s left" | tee -a "$S"
	return 1
}
if can bench 60; then
	run bench "$(upto "${BENCH_CAP:-150}")" "$DSGAP" bench --device gpu --reps "${BENCH_REPS:-5}" \
		--csv "$OUT/bench.csv"
	grep -E "^[a-z_]+(@[0-9.]+)? " "$OUT/bench.log" | tee -a "$S"
fi
if can kernels 60; then
	rm -f "$OUT/kernels.csv"
	run kernels "$(upto 200)" "$BIN/dsgap-bench-kernels" ${KERNELS_QUICK:+--quick} --csv "$OUT/kernels.csv"
fi
if can torch 60; then
	ours=()
	[ -s "$OUT/kernels.csv" ] && ours=(--ours "$OUT/kernels.csv")
	PYTHONUNBUFFERED=1 run torch "$(upto 240)" python3 scripts/gpu_bench_torch.py ${ours[@]+"${ours[@]}"} \
		--csv "$OUT/kernels.csv"
	grep -v "^[a-z_0-9]*[,@]" "$OUT/torch.log" | tail -5 >>"$S"
fi
if [ -s "$OUT/kernels.csv" ]; then
	echo "headline numbers (kernels.csv)" | tee -a "$S"
	grep -E "^(dense_tflops|cudnn_tflops|torch_fa2|dense_over_cudnn|sparse_over_cudnn@0.15|sparse_over_dense@0.15|flex_over_cudnn@0.15|sparse_over_flex@0.15|sparse_eff_tflops@0.15|sparse_block_over_cudnn|sparse_query)" \
		"$OUT/kernels.csv" | cut -d, -f1-3 | tee -a "$S"
fi
if can meta 60; then
	run gpu_meta_bench "$(upto 60)" "$BIN/gpu_meta" --bench
	grep -E "^bench" "$OUT/gpu_meta_bench.log" | tee -a "$S"
fi
if can dit 90; then
	DIT_GEN_TIMEOUT=${DIT_GEN_TIMEOUT:-$(($(left) - 75))} run dit_bench "$(left)" bash scripts/gpu_dit.sh bench
	grep -E "^[a-z_0-9.]+,[-0-9.e+naif]+," "$OUT/gpu_dit.csv" | tee -a "$S"
fi
if can length 60; then
	rm -f "$OUT/cudnn_length.csv" "$OUT/callspeed.csv"
	LENGTH_GRIDS=${LENGTH_GRIDS:-4x16x16,8x16x16,16x16x16,8x32x32,16x32x32,21x30x52,21x45x80,32x64x64}
	LENGTH_HEADS=${LENGTH_HEADS:-12,24,40}
	ns=$(echo "$LENGTH_GRIDS" | tr ',' '\n' | awk -Fx '{ printf "%s%d", (NR > 1 ? "," : ""), $1 * $2 * $3 }')
	PYTHONUNBUFFERED=1 run length_cudnn "$(upto 90)" python3 scripts/gpu_bench_torch.py --sweep "$ns" \
		--sweep-heads "$LENGTH_HEADS" --reps 10 --csv "$OUT/cudnn_length.csv"
	cap=$(upto "${LENGTH_DIT_CAP:-130}")
	run length_dit "$cap" "$DSGAP" callspeed --device gpu --path dit --grids "$LENGTH_GRIDS" --heads "$LENGTH_HEADS" \
		--max-call 2 --budget $((cap - 15)) --csv "$OUT/callspeed.csv"
	cap=$(upto "${LENGTH_BACKEND_CAP:-80}")
	[ "${LENGTH_BACKEND_CAP:-80}" -gt 0 ] && run length_backend "$cap" "$DSGAP" callspeed --device gpu --path backend \
		--grids "$LENGTH_GRIDS" --heads 12 --max-call 2 --budget $((cap - 15)) --csv "$OUT/callspeed.csv"
	echo "length: $(($(wc -l < "$OUT/callspeed.csv") - 1)) callspeed rows, $(($(wc -l < "$OUT/cudnn_length.csv") - 1)) cuDNN rows" | tee -a "$S"
fi
if can comparison 120; then
	# shellcheck disable=SC2086  # COMPARISON_ARGS splits on blanks
	run comparison "$(left)" bash experiments/comparison.sh --stage "${COMPARISON_STAGE:-gpu}" --budget $(($(left) - 20)) \
		--out "$OUT/comparison" ${COMPARISON_ARGS:-}
	tail -3 "$OUT/comparison.log" | tee -a "$S"
fi
echo "device_all.sh done at $((SECONDS - T0)) s" | tee -a "$S"
