#!/usr/bin/env bash
# scripts/gpu_meta_run.sh: the metadata-kernel test (tests/gpu_meta.c) on a GPU machine that lacks the
# harness's Debian dependencies (GSL, OpenBLAS, inih, cJSON, HDF5 C bindings), e.g. the lent H200.
#
#   scripts/gpu_meta_run.sh pack          (here, with nvcc, GSL and OpenBLAS installed) builds a static
#                                         .carry_meta/gpu_meta (glibc only) and a source kit
#                                         (libgsl.a, libgslcblas.a, GSL headers) in .carry_meta/
#   scripts/gpu_meta_run.sh device [S]    (there; carry .carry_meta) runs the prebuilt binary, or
#                                         builds one from source with nvcc + gcc + the kit when it does
#                                         not start; then the full test, the timings at n = 32760 and
#                                         compute-sanitizer memcheck on the small sizes. Logs in $OUT.
#                                         S: seconds for the full test (default 240).
set -u -o pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
CARRY=$ROOT/.carry_meta
KERNELS="group_scores query_topk select_topk pca_group pooled_scores metrics"
CORE="groups select metrics attention util policy"
ARCH="-gencode=arch=compute_90a,code=sm_90a"

build() { # build DIR BLASLIBS...: objects and the binary DIR/gpu_meta
	local dir=$1
	shift
	mkdir -p "$dir"
	local pids=()
	for k in $KERNELS; do
		nvcc -std=c++17 -O3 $ARCH -lineinfo -Ikernels -c kernels/$k.cu -o "$dir/k_$k.o" &
		pids+=($!)
	done
	for c in $CORE; do
		gcc -std=c11 -O3 -fopenmp -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -DDG_GIT_COMMIT="\"gpu_meta\"" \
			-DDG_GNUPLOT="\"\"" -DH5_USE_110_API -I"$CARRY/include" -Isrc -c src/$c.c -o "$dir/c_$c.o" &
		pids+=($!)
	done
	gcc -std=c11 -O2 -fopenmp -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I"$CARRY/include" -Isrc -Ikernels -Itests \
		-I"$(dirname "$(command -v nvcc)")/../include" -c tests/gpu_meta.c -o "$dir/gpu_meta.o" &
	pids+=($!)
	local ok=0
	for p in "${pids[@]}"; do wait "$p" || ok=1; done
	[ $ok = 0 ] || return 1
	local cudalib
	cudalib="$(dirname "$(command -v nvcc)")/../lib64"
	g++ -o "$dir/gpu_meta" "$dir"/gpu_meta.o "$dir"/k_*.o "$dir"/c_*.o -L"$cudalib" -lcudart_static \
		-static-libstdc++ -static-libgcc "$@" -lpthread -ldl -lrt -lm
}

case "${1:-}" in
pack)
	G=$(dirname "$(gcc -print-libgcc-file-name)")
	mkdir -p "$CARRY/include" "$CARRY/lib"
	cp -r /usr/include/gsl "$CARRY/include/"
	cp /usr/lib/x86_64-linux-gnu/libgsl.a /usr/lib/x86_64-linux-gnu/libgslcblas.a "$CARRY/lib/"
	build "$CARRY/obj" /usr/lib/x86_64-linux-gnu/libgsl.a /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.a \
		"$G/libgfortran.a" "$G/libquadmath.a" "$G/libgomp.a" || exit 1
	mv "$CARRY/obj/gpu_meta" "$CARRY/gpu_meta"
	strip "$CARRY/gpu_meta"
	rm -rf "$CARRY/obj"
	ls -la "$CARRY"
	;;
device)
	OUT=${OUT:-$ROOT/gpu_meta_out}
	mkdir -p "$OUT"
	LIMIT=${2:-240}
	{ nvidia-smi -L; nvcc --version | tail -1; ldd --version | head -1; } 2>&1 | tee "$OUT/env.log"
	BIN=$CARRY/gpu_meta
	"$BIN" --help >/dev/null 2>&1
	if [ $? -ne 2 ]; then
		echo "prebuilt binary does not start here: building from source (GSL's CBLAS)" | tee -a "$OUT/env.log"
		mkdir -p /tmp/gpu_meta_build
		echo 'void openblas_set_num_threads(int n) { (void)n; }' >/tmp/gpu_meta_build/stub.c
		gcc -c /tmp/gpu_meta_build/stub.c -o /tmp/gpu_meta_build/stub.obj
		build /tmp/gpu_meta_build /tmp/gpu_meta_build/stub.obj "$CARRY/lib/libgsl.a" "$CARRY/lib/libgslcblas.a" \
			-fopenmp 2>&1 |
			tee "$OUT/build.log" || exit 1
		BIN=/tmp/gpu_meta_build/gpu_meta
	fi
	export OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1
	rc=0
	timeout "$LIMIT" "$BIN" 2>&1 | tee "$OUT/gpu_meta.log" || rc=1
	timeout "${BENCH_LIMIT:-60}" "$BIN" --bench 2>&1 | tee "$OUT/bench.log" || rc=1
	if command -v compute-sanitizer >/dev/null; then
		timeout "${SAN_LIMIT:-90}" compute-sanitizer --tool memcheck --leak-check no "$BIN" --tiny 2>&1 |
			grep -v "^ok " | tail -60 | tee "$OUT/memcheck.log" || rc=1
	fi
	echo "== summary"
	grep -h "FAIL\|passed,\|ERROR SUMMARY" "$OUT"/gpu_meta.log "$OUT"/memcheck.log 2>/dev/null
	grep -h "^bench" "$OUT"/bench.log
	exit $rc
	;;
*)
	sed -n '2,14p' "$0"
	exit 2
	;;
esac
