#!/usr/bin/env bash
# svg2_call.sh (dev): one device call for svg2's speed (2026-12-06): the GPU checks of
# scripts/device_all.sh ($OUT/all); svg2's bench (gpu_meta --bench-peers) for each binary of
# GPU_METAS, two interleaved rounds; the kernels of svg2's matched bench under Nsight Compute (NCU=1);
# `dsgap callspeed --path dit` at 32760 x 12, mc-sparse and svg2 matched at rho 0.15, for each binary
# of DSGAPS, three interleaved rounds; then the comparison's speed stage ($OUT/cmp).
# Call 1 (19:33Z, H100): GPU_METAS="gpu_meta_old gpu_meta" (c8e9b84~ against the k-means rewrite
# and the chunk table), DSGAPS="dsgap_old dsgap" (c8e9b84 against a0671d2), NCU=0.
# Call 2: GPU_METAS="gpu_meta_chunk gpu_meta", DSGAPS="dsgap_chunk dsgap" (a0671d2 against the
# small groups promoted, 434cd9f, and the k-means assign from shared-memory doubles, the commit after),
# NCU=1 NCU_BEFORE=gpu_meta_chunk (run 20:51Z, BENCH_ROUNDS=1 AB_ROUNDS=1 CMP_DEADLINE=0; its attend filter `keys`
# caught the k-means' run_keys: now cs_keys).
# Pack: scripts/device_pack.sh, then the other binaries added to .carry/bin.tar.xz.
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib "$OUT/r" && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
B=.carry/bin R=$OUT/r
OUT=$OUT/all STEPS="gpu_kernels gpu_meta gpu_replay gpu_dit gpu_api gpu_cache" DEADLINE=${CHECK_DEADLINE:-150} \
	CHECK_CAP=130 bash scripts/device_all.sh 2>&1 | tail -12
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for r in $(seq ${BENCH_ROUNDS:-2}); do
	for b in ${GPU_METAS:-gpu_meta_old gpu_meta}; do
		for s in svg2 svg2/budget=matched; do
			timeout 60 $B/$b --bench-peers $s >> "$R/bench_$b.log" 2>&1
			echo "round $r $b $s rc $?" >> "$R/steps.txt"
		done
	done
done
for b in ${GPU_METAS:-gpu_meta_old gpu_meta}; do echo "== $b"; grep -h "bench peer" "$R/bench_$b.log" | cut -c1-200; done
if [ "${NCU:-0}" = 1 ] && command -v ncu > /dev/null; then # the attends' kernels, then one cold k-means iteration's
	timeout 100 ncu --metrics gpu__time_duration.sum -k 'regex:attn|small|cs_keys|sparse_chunks' -c 16 \
		$B/gpu_meta --bench-peers svg2/budget=matched > "$R/ncu_attend.log" 2>&1
	echo "ncu attend rc $?" >> "$R/steps.txt"
	timeout 60 ncu --metrics gpu__time_duration.sum -k 'regex:assign|update|run_|norms|iota|Radix|Onesweep|Histogram|Exclusive' \
		-c 24 $B/gpu_meta --bench-peers svg2/budget=matched > "$R/ncu_kmeans.log" 2>&1
	echo "ncu kmeans rc $?" >> "$R/steps.txt"
	if [ -n "${NCU_BEFORE:-}" ]; then # the same k-means iteration of another binary
		timeout 60 ncu --metrics gpu__time_duration.sum -k 'regex:assign|update|run_|norms|iota|Radix|Onesweep|Histogram|Exclusive' \
			-c 24 $B/$NCU_BEFORE --bench-peers svg2/budget=matched > "$R/ncu_kmeans_before.log" 2>&1
		echo "ncu kmeans $NCU_BEFORE rc $?" >> "$R/steps.txt"
	fi
	grep -hE "^  [A-Za-z_].*\(|gpu__time_duration" "$R/ncu_attend.log" "$R/ncu_kmeans.log" | cut -c1-110
fi
for r in $(seq ${AB_ROUNDS:-3}); do
	for b in ${DSGAPS:-dsgap_old dsgap}; do
		timeout 90 $B/$b callspeed --device gpu --path dit --grids 21x30x52 --heads 12 \
			--policies mc-sparse,svg2/budget=matched --density 0.15 --reps 5 --csv "$R/ab_$b.csv" >> "$R/ab.log" 2>&1
		echo "round $r $b callspeed rc $?" >> "$R/steps.txt"
	done
done
for b in ${DSGAPS:-dsgap_old dsgap}; do echo "== $b"; grep -h "mc-sparse\|svg2" "$R/ab_$b.csv" | cut -d, -f3,5,10,12,13,14,15; done
cat "$R/steps.txt"
OUT=$OUT/cmp STEPS=comparison COMPARISON_STAGE=speed DEADLINE=${CMP_DEADLINE:-330} bash scripts/device_all.sh 2>&1 | tail -6
tar -C "$OUT" -czf "$OUT/r.tgz" r && rm -rf "$R"
