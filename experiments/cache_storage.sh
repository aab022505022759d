#!/usr/bin/env bash
# cache_storage.sh: fidelity of the cache-storage switches of issue 21 (docs/spec.md §3.1:
# residual_dtype, keys, cfg_meta) on the CPU, against mc-sparse's fp32 residual and int32 lists.
#   open loop:   a synthetic trace (dsgap synth, 4x16x32 = 2048 tokens, 4 heads of 128, 2 layers,
#                12 steps), replayed at rho 0.15 and 0.25 with warm-up 4 (anchor step 3): mean rel-L2
#                of the output against dense after the warm-up, per switch, and its change against
#                fp32 storage (cfg_meta has one stream in a replay: no effect, not listed)
#   closed loop: the bundled model (data/model, latent 8x32x32 = 2048 tokens, 8 layers, 10 UniPC steps, CFG 3, warm-up
#                2, rho 0.15): PSNR of the final latents against dense, and against mc-sparse with fp32
#                storage (the issue's "within 0.5 dB" figure is the first one's change)
#   DSGAP=build/dsgap experiments/cache_storage.sh [--out DIR | --update-results]   (~25 min on 2 busy
#   cores; --out defaults to a fresh build/results/cache_storage-DATE, --update-results writes
#   results/cache_storage; runs in the scratch folder build/experiments/cache_storage: experiments/lib.sh)
source "$(dirname "$0")/lib.sh"
exp_init cache_storage "$@"
[ ${#EXP_ARGS[@]} = 0 ] || { echo "cache_storage.sh: unknown argument ${EXP_ARGS[0]} (--out DIR | --update-results)" >&2; exit 2; }
OUT=$RESULTS W=$WORK
mkdir -p "$W"
STARTED=$(date -u +%FT%TZ)
POL=mc-sparse,mc-sparse/residual_dtype=bf16,mc-sparse/residual_dtype=fp8,mc-sparse/keys=bitmap
if [ "${SUMMARY_ONLY:-0}" != 1 ]; then # SUMMARY_ONLY=1: the tables from the runs already in $W
"$DSGAP" synth --out "$W/synth.h5" --grid 4x16x32 --heads 4 --head-dim 128 --layers 2 --steps 12 --seed 1
"$DSGAP" replay "$W/synth.h5" --out "$W/replay" --policies "$POL" --density 0.15,0.25 --schedule warmup=4
M=$ROOT/data/model
# keys=bitmap is bit-identical to lists (tests/policy/test_cache.c), so the closed loop leaves it out
CL=mc-sparse,mc-sparse/residual_dtype=bf16,mc-sparse/residual_dtype=fp8,mc-sparse/cfg_meta=shared
"$DSGAP" generate --model "$M" --text "$M/conds.safetensors:cockatoo" --negative "$M/conds.safetensors:null" \
  --latent 8x32x32 --seed 1 --steps 10 --shift 3 --guidance 3 --policies "dense,$CL" --density 0.15 \
  --schedule warmup=2 --out "$W/generate" --quiet
fi
for f in "$W"/generate/*.h5; do # the final latents as raw float32 (no h5py needed)
  h5dump -d /latents -b LE -o "${f%.h5}.f32" "$f" > /dev/null
done
python3 - "$W" "$OUT" <<'PY'
import array, csv, glob, math, os, sys
w, out = sys.argv[1], sys.argv[2]
mean = lambda v: sum(v) / len(v)
rows = list(csv.DictReader(open(os.path.join(w, "replay", "metrics.csv"))))
agg = {}
for r in rows:
    if r["policy"] == "dense" or float(r["staleness"]) == 0 and float(r["rel_l2"]) == 0:
        continue  # warm-up and anchor units give the dense output
    agg.setdefault((r["policy"], r["density_target"]), []).append(float(r["rel_l2"]))
with open(os.path.join(out, "open_loop.csv"), "w") as f:
    f.write("policy,density_target,units,rel_l2_vs_dense,change_vs_fp32\n")
    for (p, rho), v in sorted(agg.items(), key=lambda k: (k[0][1], k[0][0] != "mc-sparse", k[0][0])):
        base = mean(agg[("mc-sparse", rho)])
        f.write("%s,%s,%d,%.6g,%+.3g%%\n" % (p, rho, len(v), mean(v), 100 * (mean(v) / base - 1)))
def lat(name):
    a = array.array("f")
    path = glob.glob(os.path.join(w, "generate", name + "*.f32"))[0]
    a.frombytes(open(path, "rb").read())
    return a
def psnr(x, ref):  # over the whole latent, peak = the reference's range
    mse = mean([(a - b) ** 2 for a, b in zip(x, ref)])
    rng = max(ref) - min(ref)
    return float("inf") if mse == 0 else 10 * math.log10(rng * rng / mse)
ref = lat("mc-sparse@")
g = list(csv.DictReader(open(os.path.join(w, "generate", "generate.csv"))))
with open(os.path.join(out, "closed_loop.csv"), "w") as f:
    f.write("policy,density_target,psnr_vs_dense,change_db,psnr_vs_fp32_storage,rel_l2_vs_fp32_storage\n")
    base = [float(r["psnr"]) for r in g if r["policy"] == "mc-sparse"][0]
    for r in g:
        if r["policy"] == "dense":
            continue
        x = lat(r["policy"].replace("/", "_") + "@")
        rel = math.sqrt(sum((a - b) ** 2 for a, b in zip(x, ref)) / sum(b * b for b in ref))
        f.write("%s,%s,%.3f,%+.3f,%.2f,%.3g\n" % (r["policy"], r["density_target"], float(r["psnr"]),
                float(r["psnr"]) - base, psnr(x, ref), rel))
PY
echo "started $STARTED, finished $(date -u +%FT%TZ), commit $(git -C "$ROOT" rev-parse --short HEAD), $("$DSGAP" info "$W/synth.h5" 2>/dev/null | head -1)" > "$OUT/run.txt"
cat "$OUT/open_loop.csv" "$OUT/closed_loop.csv"
