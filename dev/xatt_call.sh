#!/usr/bin/env bash
# dev/xatt_call.sh: one device call (carry .carry of scripts/device_pack.sh plus .carry/dsgap_old.xz, a
# dsgap before the change): gpu_meta (the peers' device metadata against their CPU twins) and gpu_replay,
# then xattention's DiT call (dsgap callspeed, 12 heads, at 1024, 32760 and 75600 tokens) with the new
# and the old binary, ROUNDS (default 3) interleaved rounds; NCU=1 (default): dev/xatt_ncu.sh after.
# $OUT/call.tgz, $OUT/call.txt.
cd "$(dirname "$0")/.." || exit 2
W=/tmp/xatt_call
rm -rf "$W" && mkdir -p "$W"
T=$OUT/call.txt
trap 'tar -C "$W" -czf "$OUT/call.tgz" .' EXIT
STEPS="gpu_meta gpu_replay" DEADLINE=${DEADLINE:-300} OUT=$W/device_all bash scripts/device_all.sh > "$W/device_all.log" 2>&1
echo "device_all rc $?" | tee "$T"
cat "$W/device_all/summary.txt" >> "$T"
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64
xz -dc .carry/dsgap_old.xz > /tmp/dsgap_old && chmod +x /tmp/dsgap_old
mkdir -p /tmp/xb && tar -C /tmp/xb -xJf .carry/bin.tar.xz
for r in $(seq "${ROUNDS:-3}"); do for b in new old; do
	x=/tmp/xb/bin/dsgap; [ "$b" = old ] && x=/tmp/dsgap_old
	timeout 90 "$x" callspeed --device gpu --path dit --grids 4x16x16,21x30x52,21x45x80 --heads 12 \
		--policies xattention/budget=matched --reps 5 --csv "$W/xatt_$b.csv" >> "$W/callspeed.log" 2>&1
	echo "callspeed $b round $r rc $?" >> "$T"
done; done
for b in new old; do echo "== $b: n heads dense call meta amortised" >> "$T"
	grep xattention "$W/xatt_$b.csv" | cut -d, -f5,7,11,12,15,14 >> "$T"; done
[ "${NCU:-1}" = 1 ] && bash dev/xatt_ncu.sh >> "$T" 2>&1 # the metadata kernels' durations
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv >> "$T"
cat "$T"
