#!/usr/bin/env bash
# cfg_meta_guidance.sh: why cfg_meta=shared is closer to dense (results/cache_storage/cfg_meta/): the
# hypothesis is CFG's amplification. The guided velocity v_u + g (v_c - v_u) carries the sparse errors
# as e_u + g (e_c - e_u): with each pass selecting its own keys e_c and e_u are less alike and their
# difference is amplified g times; with one selection for both they are more alike and partly cancel.
# If so, shared's advantage grows with g and vanishes towards g = 1 (no CFG: one pass, no effect).
# Per guidance scale and prompt of experiments/cfg_meta.ini (seed 1, the same latent, steps, shift,
# warm-up and rho 0.15): dsgap generate dense, mc-sparse and mc-sparse/cfg_meta=shared on the CPU;
# PSNR of the final latents against dense (generate.csv's per-frame mean) and shared - own.
#   DSGAP=build/dsgap experiments/cfg_meta_guidance.sh OUTDIR [G ...]   (default G: 1.5 3 5; 29 min on 2
#   cores before the runs shared the cores out by OMP_NUM_THREADS, 2026-12-06; the test 2.9x faster)
# -> OUTDIR/cfg_meta_guidance.{csv,md}. CMG_LATENT (default 8x32x32) and CMG_STEPS (default 10) make it
# smaller (tests/experiments/exp_cfg_meta_guidance.sh).
set -eu
cd "$(dirname "$0")/.."
DSGAP=${DSGAP:-build/dsgap}
OUT=${1:?usage: experiments/cfg_meta_guidance.sh OUTDIR [G ...]}
shift
GS=${*:-1.5 3 5}
C=data/model/conds.safetensors
W=$(mktemp -d "${TMPDIR:-/tmp}/cfg_meta_guidance.XXXXXX")
trap 'rm -rf "$W"' EXIT
# the six prompts run side by side, the cores shared out (OpenMP threads spin: more than the cores stall)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( ($(nproc) + 5) / 6 ))}
run() { # guidance prompt
  "$DSGAP" generate --model data/model --text "$C:$2" --negative "$C:null" --latent "${CMG_LATENT:-8x32x32}" --seed 1 \
    --steps "${CMG_STEPS:-10}" \
    --shift 3 --guidance "$1" --sampler unipc --schedule warmup=2 --density 0.15 \
    --policies dense,mc-sparse,mc-sparse/cfg_meta=shared --quiet --out "$W/g$1-$2" > /dev/null 2> "$W/err-g$1-$2"
}
for g in $GS; do
  pids=()
  prompts=(cockatoo tree vtest pan_left zoom_in rotate_cw)
  for p in "${prompts[@]}"; do run "$g" "$p" & pids+=($!); done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { echo "cfg_meta_guidance.sh: dsgap generate at guidance $g, prompt ${prompts[$i]}" \
      "failed: $(head -1 "$W/err-g$g-${prompts[$i]}")" >&2; kill "${pids[@]}" 2> /dev/null; wait; exit 1; }
  done
done
mkdir -p "$OUT"
python3 - "$W" "$OUT" $GS <<'PY'
import csv, os, statistics, sys
w, out, gs = sys.argv[1], sys.argv[2], sys.argv[3:]
prompts = ["cockatoo", "tree", "vtest", "pan_left", "zoom_in", "rotate_cw"]
rows = []
for g in gs:
    for p in prompts:
        r = {x["policy"]: float(x["psnr"]) for x in csv.DictReader(open(os.path.join(w, "g%s-%s" % (g, p), "generate.csv")))}
        rows.append((g, p, r["mc-sparse"], r["mc-sparse/cfg_meta=shared"]))
with open(os.path.join(out, "cfg_meta_guidance.csv"), "w") as f:
    f.write("guidance,prompt,seed,psnr_own,psnr_shared,shared_minus_own\n")
    for g, p, o, s in rows:
        f.write("%s,%s,1,%.4f,%.4f,%.4f\n" % (g, p, o, s, s - o))
with open(os.path.join(out, "cfg_meta_guidance.md"), "w") as f:
    f.write("| guidance g | PSNR own (dB), mean | PSNR shared (dB), mean | shared − own (dB): mean | min | max | shared ahead |\n")
    f.write("|--:|--:|--:|--:|--:|--:|--:|\n")
    for g in gs:
        d = [(o, s) for gg, p, o, s in rows if gg == g]
        diff = [s - o for o, s in d]
        f.write("| %s | %.2f | %.2f | %+.2f | %+.2f | %+.2f | %d of %d |\n" % (g, statistics.mean(o for o, s in d),
                statistics.mean(s for o, s in d), statistics.mean(diff), min(diff), max(diff), sum(x > 0 for x in diff), len(diff)))
print(open(os.path.join(out, "cfg_meta_guidance.md")).read())
PY
