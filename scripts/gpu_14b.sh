#!/usr/bin/env bash
# gpu_14b.sh: issue 21's runs of the Wan2.1-14B architecture at 720p x 81 on one H200, in device calls
# of < 9 minutes, from the binaries of scripts/device_pack.sh (builds nothing). The work is the cells of
# one closed-loop experiment (dsgap run; each cell its own process and model load):
#   cell 0  dense, STEPS (10) UniPC steps, CFG 5, shift 5, seed 0                          ~ 300 s
#   cell 1  mc-sparse/keys=bitmap/residual_dtype=bf16 at rho 0.15, warm-up 2 (anchor at step 1),
#           layer 0 dense                                                                  ~ 210 s
#   cell 2  the same at rho 0.25                                                           ~ 230 s
#   offload cell 1 again with [device] cache_offload = true (--cache-offload): its latents must be
#           cell 1's bit for bit; copy time and exposed wait                               ~ 300 s
# The model: random weights (scripts/gpu_dit.py make 14b --shards 6), all 40 blocks, in the layout
# Wan-AI ships (diffusers names, 6 shards + diffusion_pytorch_model.safetensors.index.json).
# Each call runs the cells still missing, in that order, as long as DEADLINE (530 s) allows one to
# finish, and says what is left: call again until it prints "gpu_14b: all done". State lives in $W on
# the device (kept while the machine stays warm between calls); a fresh machine restores what earlier
# calls sent back (PREV: a folder in the working tree holding those files: every cell*-meta.tgz, and
# cell0-latents.tgz.part* until the sparse cells are done) and remakes the model (same seed, same
# weights). After each cell its final latents' sha256 and, against cell 0's, PSNR/SSIM (per frame,
# python/dsgap/generate.py's numpy copy of src/dit/fidelity.c) are kept, so no other latents need
# to travel. Each call writes:
#   $OUT/gpu_14b.log   every command's output: memory plans, load time, per-step offload lines
#   $OUT/plan-14b.txt  the memory plans (fp32/int32, bf16 + bitmap, with and without --cache-offload)
#   $OUT/gpu_14b.csv   name,value,unit: per cell its peak GPU memory (nvidia-smi), transformer time and
#                      per-step costs (dense step, anchor step, mean reuse step; measured, step_s), the
#                      50-step projection (paper's 20% warm-up: 9 dense + anchor + 40 reuse against 50
#                      dense), PSNR/SSIM against dense, offload figures and bit-identity
#   $OUT/cellN-meta.tgz  each cell this call made: run.json, peak memory, sha256 and fidelity (small)
#   $OUT/cell0-latents.tgz.partNN  cell 0's final latents in 15 MB pieces (the device returns 16 MiB files)
#   (device) OUT=dir [PREV=dir] [DEADLINE=530] [OFFLOAD=1] bash scripts/gpu_14b.sh   (carry .carry)
#   (a CPU trial of the flow) CONFIG=small LATENT=3x16x24 DEVICE=cpu DSGAP=build/dsgap ... bash scripts/gpu_14b.sh
set -u
cd "$(dirname "$0")/.." || exit 2
T0=$SECONDS
OUT=${OUT:-$PWD/device-out}
DEADLINE=${DEADLINE:-530}
W=${GPU14_WORK:-/tmp/gpu_14b}
CONFIG=${CONFIG:-14b}
LATENT=${LATENT:-21x90x160}
STEPS=${STEPS:-10}
DEVICE=${DEVICE:-gpu}
OFFLOAD=${OFFLOAD:-1}
PY=${PY:-python3}
POL=mc-sparse/keys=bitmap/residual_dtype=bf16
if [ -z "${DSGAP:-}" ]; then # the carried binaries (scripts/device_pack.sh), unpacked once
	mkdir -p /tmp/dglib
	[ -d /tmp/dglib/lib ] || tar -C /tmp/dglib -xJf .carry/lib.tar.xz
	[ -d .carry/bin ] || tar -C .carry -xJf .carry/bin.tar.xz
	export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
	DSGAP=$PWD/.carry/bin/dsgap
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
mkdir -p "$OUT" "$W"
L=$OUT/gpu_14b.log
log() { echo "$*" | tee -a "$L"; }
left() { echo $((DEADLINE - (SECONDS - T0))); }
log "gpu_14b.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(cat .carry/COMMIT 2>/dev/null || git rev-parse --short=12 HEAD 2>/dev/null)"
fail=0
mem_poll() { while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; sleep 0.5; done > "$1" 2>/dev/null; }
step() { # name timeout command...: output to the log, a line with its status and seconds
	local name=$1 to=$2; shift 2
	local t0=$SECONDS
	timeout "$to" "$@" >> "$L" 2>&1
	local rc=$?
	log "gpu_14b $name: rc=$rc ($((SECONDS - t0)) s)"
	[ $rc = 0 ] || fail=1
	return $rc
}

# --- memory plans (no weights) ------------------------------------------------------------------------
if [ "$CONFIG" = 14b ]; then
	for off in "" --cache-offload; do
		"$DSGAP" generate --plan-only --arch wan2.1-14b --latent "$LATENT" --density 0.15,0.25 \
			--policies "mc-sparse,$POL" --schedule warmup=2,dense_layers=0 $off
	done > "$OUT/plan-14b.txt" 2>&1
	log "plans: $(grep -c '^memory plan' "$OUT/plan-14b.txt") in plan-14b.txt"
fi

# --- the model: 40 blocks, random weights, 6 shards + index ------------------------------------------
M=$W/m
if [ ! -f "$M/model/diffusion_pytorch_model.safetensors.index.json" ]; then
	rm -rf "$M"
	step make_$CONFIG 240 $PY scripts/gpu_dit.py make "$CONFIG" "$M" --seed 3 --shards 6 --latent "$LATENT" ||
		{ log "gpu_14b: no model"; exit 1; }
fi
du -sh "$M/model" | tee -a "$L"

# --- the experiment ------------------------------------------------------------------------------------
printf '%s\n' "[experiment]" "name = wan14b" "[model]" "path = $M/model" "latent = $LATENT" "steps = $STEPS" \
	"shift = 5" "guidance = 5" "sampler = unipc" "seeds = 0" "[prompts]" "p = $M/text.safetensors" \
	"[policies]" "list = dense, $POL" "[densities]" "list = 0.15, 0.25" "[schedules]" "w2 = warmup=2,dense_layers=0" \
	"[device]" "device = $DEVICE" > "$W/e.ini"
sed 's/^device = .*/&\ncache_offload = true/' "$W/e.ini" > "$W/e_off.ini"
if [ -n "${PREV:-}" ]; then # what earlier calls sent back: *.tgz, and *.tgz.partNN pieces
	for t in $(ls "$PREV"/*.tgz "$PREV"/*.tgz.part* 2>/dev/null | sed 's/\.part[a-z]*$//' | sort -u); do
		cat "$t"* | tar -xz -C "$W" --skip-old-files && log "restored $(basename "$t") from PREV"
	done
fi
mapfile -t CELLS < <("$DSGAP" run "$W/e.ini" --out "$W/exp" --list 2>/dev/null | awk '{print $2}')
[ ${#CELLS[@]} = 3 ] || { log "gpu_14b: expected 3 cells, got: ${CELLS[*]}"; exit 1; }
NEED=(300 210 230 300) # seconds: cells 0-2, the offloaded cell 1 (pinning 78 GB, unpinning at its end)
[ "$CONFIG" = 14b ] || NEED=(5 5 5 5)
# a cell is done when keep$tag.json (its run.json) is here: outside the experiment's folder, which
# dsgap run clears of cells without latents; cell 0's latents are kept as ref.h5
done_cell() { [ -s "$W/keep$1.json" ]; }
# after a cell: meta$tag.json (the sha256 of its final latents; against ref.h5, PSNR/SSIM by
# python/dsgap/generate.py's summarise, src/dit/fidelity.c in numpy: test python_generate), so that
# later calls need no latents but cell 0's
post_cell() { # tag latents reference-or-empty
	$PY - "$2" "$3" "$W/meta$1.json" <<'PY' >> "$L" 2>&1
import hashlib, importlib.util, json, os, sys
import h5py, numpy as np
x = h5py.File(sys.argv[1], "r")["latents"][:]
m = {"sha256": hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()}
if sys.argv[2]:
    spec = importlib.util.spec_from_file_location("dsgen", os.path.join("python", "dsgap", "generate.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    m.update(gen.summarise(h5py.File(sys.argv[2], "r")["latents"][:], x))
json.dump(m, open(sys.argv[3], "w"))
print("meta", sys.argv[3], m)
PY
}
run_cell() { # tag ini folder shard cell: run one cell with the GPU's memory polled
	local tag=$1 ini=$2 dir=$3 shard=$4 c=$5
	mem_poll "$W/mem$tag.txt" &
	local poll=$!
	step cell$tag "$(left)" "$DSGAP" run "$ini" --out "$W/$dir" --shard "$shard"
	kill "$poll" 2>/dev/null; wait "$poll" 2>/dev/null
	sort -n "$W/mem$tag.txt" 2>/dev/null | tail -1 > "$W/peak$tag.txt"
	local cd=$W/$dir/cells/$c
	[ -s "$cd/run.json" ] && [ -s "$cd/latents.h5" ] || return 1
	if [ "$tag" = 0 ]; then
		cp "$cd/latents.h5" "$W/ref.h5" && post_cell "$tag" "$cd/latents.h5" ""
	elif [ -s "$W/ref.h5" ]; then
		post_cell "$tag" "$cd/latents.h5" "$W/ref.h5"
	else # cell 0's latents not kept (the sparse cells done): the sha256 alone (the offloaded cell's
		# fidelity is cell 1's where the two are bit-identical)
		post_cell "$tag" "$cd/latents.h5" ""
	fi || return 1
	cp "$cd/run.json" "$W/keep$tag.json"
	tar -C "$W" -czf "$OUT/cell$tag-meta.tgz" "keep$tag.json" "peak$tag.txt" "meta$tag.json"
}
for i in 0 1 2; do
	c=${CELLS[$i]}
	done_cell "$i" && continue
	if [ "$(left)" -lt "${NEED[$i]}" ]; then
		log "cell $i ($c): not started, $(left) s left (needs ~${NEED[$i]} s): call again"
		break
	fi
	run_cell "$i" "$W/e.ini" exp "$i/3" "$c" || break
	if [ "$i" = 0 ]; then # cell 0's latents: the reference of the others, in 15 MB pieces (16 MiB a file back)
		tar -C "$W" -cz ref.h5 | split -b 15M - "$OUT/cell0-latents.tgz.part"
	fi
done
c1=${CELLS[1]}
if [ "$OFFLOAD" = 1 ] && done_cell 1 && ! done_cell _off; then
	if [ "$(left)" -lt "${NEED[3]}" ]; then
		log "offload cell ($c1): not started, $(left) s left: call again"
	else
		run_cell _off "$W/e_off.ini" exp_off 1/3 "$c1"
	fi
fi

# --- the figures ---------------------------------------------------------------------------------------
$PY - "$W" > "$OUT/gpu_14b.csv" 2>> "$L" <<'PY'
import json, os, sys
w = sys.argv[1]
print("name,value,unit")
def rj(tag):
    p = os.path.join(w, "keep%s.json" % tag)
    return json.load(open(p)) if os.path.exists(p) else None
def peak(tag):
    try:
        return float(open(os.path.join(w, "peak%s.txt" % tag)).read().split()[0]) / 1024
    except (OSError, IndexError, ValueError):
        return None
names = ["dense", "mc_sparse_0.15", "mc_sparse_0.25"]
runs = [rj(i) for i in range(3)]
dense = runs[0]
dstep = sum(dense["step_s"]) / len(dense["step_s"]) if dense else None
for i, (n, r) in enumerate(zip(names, runs)):
    if not r:
        print("%s_missing,1,cell not run yet" % n)
        continue
    if peak(i) is not None:
        print("%s_peak_gib,%.2f,GiB (nvidia-smi: the cell's process)" % (n, peak(i)))
    print("%s_transformer_s,%.2f,s (%d steps)" % (n, r["transformer_s"], len(r["step_s"])))
    if "load_s" in r:
        print("%s_load_s,%.2f,s (dg_wan_load: %.1f GB of shards read, converted, uploaded)" % (n, r["load_s"], r["load_bytes"] / 1e9))
    if i == 0:
        print("dense_step_s,%.3f,s (measured: mean of %d steps)" % (dstep, len(r["step_s"])))
        continue
    s = r["step_s"]
    anchor, reuse = s[1], sum(s[2:]) / len(s[2:])
    print("%s_step0_s,%.3f,s (measured: a dense step)" % (n, s[0]))
    print("%s_anchor_step_s,%.3f,s (measured: step 1, dense + metadata + residuals)" % (n, anchor))
    print("%s_reuse_step_s,%.3f,s (measured: mean of steps 2..%d)" % (n, reuse, len(s) - 1))
    print("%s_metadata_s,%.2f,s (device time of groups/scores/select, the anchor's)" % (n, r["metadata_s"]))
    print("%s_density,%.4f,computed pairs / N^2 over the run" % (n, r["density"]))
    if dstep:
        print("%s_speedup_10,%.3f,ratio (measured: the 10-step runs' transformer time)" % (n, dense["transformer_s"] / r["transformer_s"]))
        d50, s50 = 50 * dstep, 9 * dstep + anchor + 40 * reuse
        print("%s_dense_50_s,%.1f,s (projection: 50 dense steps)" % (n, d50))
        print("%s_sparse_50_s,%.1f,s (projection: 9 dense + anchor + 40 reuse)" % (n, s50))
        print("%s_speedup_50,%.3f,ratio (projection)" % (n, d50 / s50))
def meta(tag):
    p = os.path.join(w, "meta%s.json" % tag)
    return json.load(open(p)) if os.path.exists(p) else None
for i in (1, 2):
    m = meta(i)
    if m and "psnr" in m:
        print("%s_psnr,%.4f,dB vs dense (final latents, per frame, mean; worst frame %.4f)" % (names[i], m["psnr"], m["psnr_min"]))
        print("%s_ssim,%.6f,vs dense (per frame, mean; worst frame %.6f)" % (names[i], m["ssim"], m["ssim_min"]))
off = rj("_off")
if off:
    base = runs[1]
    m1, mo = meta(1), meta("_off")
    same = bool(m1 and mo and m1["sha256"] == mo["sha256"])
    print("offload_bit_identical,%d,1 = the offloaded cell's final latents equal cell 1's (sha256 of the array)" % same)
    if peak("_off") is not None:
        print("offload_peak_gib,%.2f,GiB (nvidia-smi)" % peak("_off"))
    print("offload_transformer_s,%.2f,s (cell 1 without: %.2f)" % (off["transformer_s"], base["transformer_s"]))
    if "load_s" in off:
        print("offload_load_s,%.2f,s (dg_wan_load: %.1f GB of shards read, converted, uploaded)" % (off["load_s"], off["load_bytes"] / 1e9))
    s = off["step_s"]
    print("offload_anchor_step_s,%.3f,s (measured; includes pinning host memory)" % s[1])
    print("offload_reuse_step_s,%.3f,s (measured: mean of steps 2..)" % (sum(s[2:]) / len(s[2:])))
    print("offload_up_gb,%.2f,GB host to device over the run" % (off["offload_up_bytes"] / 1e9))
    print("offload_down_gb,%.2f,GB written back (anchor)" % (off["offload_down_bytes"] / 1e9))
    print("offload_copy_s,%.2f,s copy-stream busy" % off["offload_copy_s"])
    print("offload_wait_s,%.3f,s the compute stream waited (exposed)" % off["offload_wait_s"])
    print("offload_hidden_pct,%.1f,%% of the copy time hidden" % (100 * (1 - off["offload_wait_s"] / off["offload_copy_s"]) if off["offload_copy_s"] > 0 else 100))
    print("offload_pin_s,%.2f,s pinning host memory on the loop's thread (exposed)" % off["offload_pin_s"])
    if "offload_pin_ahead_bytes" in off:
        print("offload_pin_ahead_gb,%.2f,GB pinned ahead beside the loop (from the memory plan)" % (off["offload_pin_ahead_bytes"] / 1e9))
        print("offload_pin_ahead_s,%.2f,s until the last of it was pinned" % off["offload_pin_ahead_s"])
PY
log "--- $OUT/gpu_14b.csv"; tee -a "$L" < "$OUT/gpu_14b.csv"
missing=$(grep -c "_missing," "$OUT/gpu_14b.csv")
if [ "$missing" = 0 ] && { [ "$OFFLOAD" != 1 ] || grep -q "^offload_bit_identical" "$OUT/gpu_14b.csv"; }; then
	log "gpu_14b: all done ($((SECONDS - T0)) s)"
else
	log "gpu_14b: not finished ($missing of cells 0-2 missing, and the offloaded cell unless OFFLOAD=0): call again, with PREV holding what the calls so far sent back"
fi
exit $fail
