#!/usr/bin/env bash
# dev/xatt_call.sh: one device call (carry .carry of scripts/device_pack.sh plus .carry/dsgap_old.xz, a
# dsgap before the change): device_all.sh's STEPS (default gpu_meta gpu_replay: the peers' device
# metadata against their CPU twins, GPU replay against CPU), then the DiT call of each of POLICIES
# (default xattention/budget=matched; dsgap callspeed, 12 heads, at 1024, 32760 and 75600 tokens) with
# the new and the old binary, ROUNDS (default 3) interleaved rounds; NCU=1 (default): dev/xatt_ncu.sh
# after; CUDNN=1: cuDNN SDPA at 32760 tokens first. $OUT/call.tgz, $OUT/call.txt.
cd "$(dirname "$0")/.." || exit 2
W=/tmp/xatt_call
rm -rf "$W" && mkdir -p "$W"
T=$OUT/call.txt
trap 'tar -C "$W" --exclude="*.h5" -czf "$OUT/call.tgz" .' EXIT
STEPS="${STEPS:-gpu_meta gpu_replay}" DEADLINE=${DEADLINE:-300} OUT=$W/device_all bash scripts/device_all.sh > "$W/device_all.log" 2>&1
echo "device_all rc $?" | tee "$T"
cat "$W/device_all/summary.txt" >> "$T"
export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64
xz -dc .carry/dsgap_old.xz > /tmp/dsgap_old && chmod +x /tmp/dsgap_old
mkdir -p /tmp/xb && tar -C /tmp/xb -xJf .carry/bin.tar.xz
if [ "${CUDNN:-0}" = 1 ]; then # cuDNN SDPA at 32760 tokens (the 5x target's reference)
	timeout 90 python3 scripts/gpu_bench_torch.py --sweep 32760 --csv "$W/cudnn32760.csv" > "$W/cudnn32760.log" 2>&1
	echo "cuDNN at 32760 rc $?" >> "$T"; cut -d, -f1-4 "$W/cudnn32760.csv" >> "$T"
fi
for r in $(seq "${ROUNDS:-3}"); do for b in new old; do
	x=/tmp/xb/bin/dsgap; [ "$b" = old ] && x=/tmp/dsgap_old
	timeout 150 "$x" callspeed --device gpu --path dit --grids 4x16x16,21x30x52,21x45x80 --heads 12 \
		--policies "${POLICIES:-xattention/budget=matched}" --reps 5 --csv "$W/xatt_$b.csv" >> "$W/callspeed.log" 2>&1
	echo "callspeed $b round $r rc $?" >> "$T"
done; done
# the same closed loop (bundled model, every peer, CFG) with both binaries: the same final latents
for b in new old; do
	x=/tmp/xb/bin/dsgap; [ "$b" = old ] && x=/tmp/dsgap_old
	timeout 120 "$x" generate --model data/model --text data/model/conds.safetensors:cockatoo \
		--negative data/model/conds.safetensors:null --out "$W/gen_$b" --latent 16x32x32 --steps 4 --guidance 3 \
		--policies peers --density 0.15 --schedule warmup=1 --device gpu --quiet >> "$W/generate.log" 2>&1
	echo "generate $b rc $?" >> "$T"
done
cut -d, -f1-7 "$W/gen_new/generate.csv" > "$W/gen_new.cut"; cut -d, -f1-7 "$W/gen_old/generate.csv" > "$W/gen_old.cut"
cmp "$W/gen_new.cut" "$W/gen_old.cut" >> "$T" 2>&1 && echo "generate: new and old latents' PSNR/SSIM columns identical" >> "$T"
cat "$W/gen_new.cut" >> "$T"
for b in new old; do echo "== $b: policy n heads dense call amortised meta" >> "$T"
	grep -v '^path' "$W/xatt_$b.csv" | cut -d, -f3,5,7,11,12,14,15 >> "$T"; done
[ "${NCU:-1}" = 1 ] && bash dev/xatt_ncu.sh >> "$T" 2>&1 # the metadata kernels' durations
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv >> "$T"
cat "$T"
