#!/usr/bin/env bash
# gpu_profile.sh: on the GPU machine, Nsight Systems' summaries (GPU kernels, CUDA API calls) of a
# short closed loop of the Wan2.1-1.3B architecture at 480p x 81 frames: 12 CFG steps dense, then
# mc-sparse at rho 0.15 (warm-up 10, anchor 9, layer 0 dense: two sparse steps), the schedule of
# scripts/gpu_dit.sh bench cut short. Says where a run's device time goes kernel by kernel, and how
# long the host waits in synchronising calls. Writes $OUT/profile.txt; exits 0 saying so where nsys
# is absent.
#   (device) OUT=dir bash scripts/gpu_profile.sh   (from device_all.sh, BENCHES=profile, after
#            scripts/gpu_dit.sh prepare made the weights in /tmp/gpu_dit/w13b)
set -u
OUT=${OUT:-$PWD/device-out}
B=/tmp/gpu_dit/w13b
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys \
	/usr/local/cuda/nsight-systems-*/bin/nsys 2>/dev/null | head -1)
if [ -z "$NSYS" ]; then
	echo "gpu_profile: no nsys on this machine: skipped" | tee "$OUT/profile.txt"
	exit 0
fi
[ -f "$B/model/config.json" ] || { echo "gpu_profile: no weights in $B (run scripts/gpu_dit.sh prepare)"; exit 1; }
"$NSYS" profile --force-overwrite true --trace cuda -o /tmp/dit_profile "$DSGAP" generate --model "$B/model" \
	--text "$B/text.safetensors" --noise "$B/noise.safetensors" --steps 12 --guidance 5 --shift 5 --device gpu \
	--policies dense,mc-sparse --density 0.15 --schedule warmup=10,anchors=9,dense_layers=0 \
	--out /tmp/dit_profile_gen --quiet >/dev/null || exit 1
{
	echo "# nsys summaries: 12-step CFG closed loop, dense then mc-sparse, $(cat .carry/COMMIT 2>/dev/null)"
	cat /tmp/dit_profile_gen/generate.csv
	"$NSYS" stats --report cuda_gpu_kern_sum,cuda_api_sum --format table /tmp/dit_profile.nsys-rep 2>&1 |
		cut -c1-220
} > "$OUT/profile.txt"
head -60 "$OUT/profile.txt"
