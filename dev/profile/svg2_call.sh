#!/usr/bin/env bash
# svg2_call.sh (dev): one device call after svg2's k-means rewrite and the sparse kernel's chunk table
# (2026-12-06): the GPU checks of scripts/device_all.sh ($OUT/all); svg2's bench before
# (.carry/bin/gpu_meta_old: this test, the k-means and sparse kernels of c8e9b84~) and after, two
# interleaved rounds; `dsgap callspeed --path dit` at 32760 x 12, mc-sparse and svg2 matched at
# rho 0.15, before (.carry/bin/dsgap_old: the kernels of c8e9b84, k-means new, no chunk table) and
# after, three interleaved rounds; then the comparison's speed stage ($OUT/cmp).
# Pack: scripts/device_pack.sh, then gpu_meta_old and dsgap_old added to .carry/bin.tar.xz.
cd "$(dirname "$0")/../.." || exit 2
mkdir -p /tmp/dglib "$OUT/r" && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C .carry -xJf .carry/bin.tar.xz
B=.carry/bin R=$OUT/r
OUT=$OUT/all STEPS="gpu_kernels gpu_meta gpu_replay gpu_dit gpu_api gpu_cache" DEADLINE=${CHECK_DEADLINE:-150} \
	CHECK_CAP=130 bash scripts/device_all.sh 2>&1 | tail -12
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for r in 1 2; do
	for b in gpu_meta_old gpu_meta; do
		for s in svg2 svg2/budget=matched; do
			timeout 60 $B/$b --bench-peers $s >> "$R/bench_$b.log" 2>&1
			echo "round $r $b $s rc $?" >> "$R/steps.txt"
		done
	done
done
grep -h "bench peer" "$R"/bench_*.log | cut -c1-230
for r in 1 2 3; do
	for b in dsgap_old dsgap; do
		timeout 90 $B/$b callspeed --device gpu --path dit --grids 21x30x52 --heads 12 \
			--policies mc-sparse,svg2/budget=matched --density 0.15 --reps 5 --csv "$R/ab_$b.csv" >> "$R/ab.log" 2>&1
		echo "round $r $b callspeed rc $?" >> "$R/steps.txt"
	done
done
grep -h "mc-sparse\|svg2" "$R"/ab_dsgap_old.csv "$R"/ab_dsgap.csv | cut -d, -f3,5,10,12,13,14,15
cat "$R/steps.txt"
OUT=$OUT/cmp STEPS=comparison COMPARISON_STAGE=speed DEADLINE=${CMP_DEADLINE:-330} bash scripts/device_all.sh 2>&1 | tail -6
tar -C "$OUT" -czf "$OUT/r.tgz" r && rm -rf "$R"
