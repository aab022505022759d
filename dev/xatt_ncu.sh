#!/usr/bin/env bash
# dev/xatt_ncu.sh: Nsight Compute durations of xattention's metadata kernels in one DiT call at 32760 x 12
# and at 1024 x 12 (dsgap callspeed, reps 1), new (.carry/bin) and old (.carry/dsgap_old.xz) binary.
cd "$(dirname "$0")/.." || exit 2
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64
mkdir -p /tmp/dglib /tmp/xb && tar -C /tmp/dglib -xJf .carry/lib.tar.xz && tar -C /tmp/xb -xJf .carry/bin.tar.xz
xz -dc .carry/dsgap_old.xz > /tmp/dsgap_old && chmod +x /tmp/dsgap_old
for g in 21x30x52 4x16x16; do for b in new old; do
	x=/tmp/xb/bin/dsgap; [ "$b" = old ] && x=/tmp/dsgap_old
	echo "== $b $g"
	timeout 70 /usr/local/cuda/bin/ncu --kernel-name regex:"choose_keeps|softmax_det|rank_groups|write_take|antidiag|stride_gather|expand" \
		--launch-count 40 --metrics gpu__time_duration.sum --csv \
		"$x" callspeed --device gpu --path dit --grids $g --heads 12 --policies xattention/budget=matched --reps 1 \
		--csv /tmp/ncu_$b.csv 2>/dev/null | grep gpu__time | awk -F'","' '{name = $5; v = $NF; u = $(NF - 1); gsub(/"/, "", v); gsub(/,/, "", v)
			if (match(name, /choose_keeps|softmax_det_reg|softmax_det|rank_groups|write_take|antidiag_blocks|stride_gather|expand_bits/)) {
				k = substr(name, RSTART, RLENGTH); n[k]++; s[k] += v; unit[k] = u } }
		END { for (k in n) printf "%s n=%d mean=%.2f %s\n", k, n[k], s[k] / n[k], unit[k] }' | sort
done; done
