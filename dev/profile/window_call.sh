#!/usr/bin/env bash
# window_call.sh (dev): one device call after the persistent window walk (2026-12-06): the GPU
# checks and the 12-head length sweep of scripts/device_all.sh ($OUT/all), then the window call
# A/B: `dsgap callspeed --path dit` at 32760 tokens x 12 heads (grid 21x30x52), ditfastattn and
# mc-sparse at matched rho 0.15, the binary before the change (.carry/bin/dsgap_old: kernels/ of the
# commit before) and after (.carry/bin/dsgap), three interleaved rounds -> $OUT/ab.csv.
# Pack: scripts/device_pack.sh, then dsgap_old added to .carry/bin.tar.xz.
cd "$(dirname "$0")/../.." || exit 2
OUT=$OUT/all STEPS="gpu_kernels gpu_meta gpu_replay gpu_dit gpu_api gpu_cache closed_loop length" DEADLINE=${DEADLINE:-430} \
	CHECK_CAP=${CHECK_CAP:-270} LENGTH_HEADS=12 LENGTH_BACKEND_CAP=0 bash scripts/device_all.sh 2>&1 | tail -40
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for r in 1 2 3; do
	for b in dsgap_old dsgap; do
		timeout 60 .carry/bin/$b callspeed --device gpu --path dit --grids 21x30x52 --heads 12 \
			--policies ditfastattn,mc-sparse --density 0.15 --reps 5 --csv "$OUT/ab_$b.csv" >> "$OUT/ab.log" 2>&1
		echo "round $r $b rc $?"
	done
done
head -3 "$OUT/ab_dsgap.csv"
grep -h "ditfastattn" "$OUT"/ab_dsgap_old.csv "$OUT"/ab_dsgap.csv | cut -c1-220
