#!/usr/bin/env bash
# exp_cfg_meta_guidance.sh: experiments/cfg_meta_guidance.sh on the bundled model, made small
# (CMG_LATENT=4x32x32, 1024 tokens; CMG_STEPS=3; one guidance scale): 6 rows, each prompt's PSNR of
# own and shared equal to an independent `dsgap generate` of that prompt with the experiment's
# options, shared − own their difference, the table's mean and sign count those of the rows; a run
# that fails is one line and a non-zero exit. Exit 77 (skipped) without the bundled model.
. "$(dirname "$0")/../lib.sh" exp-cfg-meta-guidance
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
src=$DSGAP_SOURCE
[ -f "$src/data/model/config.json" ] || { echo "skipped: no bundled model in data/model"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
export CMG_LATENT=4x32x32 CMG_STEPS=3
unset OMP_NUM_THREADS # ctest sets 2 a test: the script shares the cores out among its six runs itself
DSGAP=$DSGAP bash "$src/experiments/cfg_meta_guidance.sh" "$tmp/out" 2 > "$tmp/log" 2>&1
check "runs (exit 0), csv and md written" eval '[ $? -eq 0 ] && [ -s "$tmp/out/cfg_meta_guidance.csv" ] && [ -s "$tmp/out/cfg_meta_guidance.md" ]'
check "6 rows at guidance 2, one per prompt" eval '[ $(grep -c "^2,.*,1," "$tmp/out/cfg_meta_guidance.csv") -eq 6 ]'
C=$src/data/model/conds.safetensors
(cd "$src" && "$DSGAP" generate --model data/model --text "$C:tree" --negative "$C:null" --latent 4x32x32 --seed 1 \
  --steps 3 --shift 3 --guidance 2 --sampler unipc --schedule warmup=2 --density 0.15 \
  --policies dense,mc-sparse,mc-sparse/cfg_meta=shared --quiet --out "$tmp/ref") > /dev/null 2>&1
python3 - "$tmp/out/cfg_meta_guidance.csv" "$tmp/out/cfg_meta_guidance.md" "$tmp/ref/generate.csv" > "$tmp/py" 2>&1 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ref = {r["policy"]: float(r["psnr"]) for r in csv.DictReader(open(sys.argv[3]))}
tree = [r for r in rows if r["prompt"] == "tree"][0]
assert abs(float(tree["psnr_own"]) - ref["mc-sparse"]) < 1e-4, (tree, ref)
assert abs(float(tree["psnr_shared"]) - ref["mc-sparse/cfg_meta=shared"]) < 1e-4, (tree, ref)
d = [float(r["psnr_shared"]) - float(r["psnr_own"]) for r in rows]
assert all(abs(x - float(r["shared_minus_own"])) < 2e-4 for x, r in zip(d, rows))
line = [l for l in open(sys.argv[2]) if l.startswith("| 2 |")][0].split("|")
assert abs(float(line[4]) - sum(d) / len(d)) < 0.006, (line, d)
assert line[7].strip() == "%d of 6" % sum(x > 0 for x in d), line
print("ok")
PY
check "tree's PSNRs those of an independent generate; differences, mean and sign count those of the rows" \
  eval 'grep -qx ok "$tmp/py" || { cat "$tmp/py"; false; }'
# a failing run: a guidance the sampler refuses
DSGAP=$DSGAP bash "$src/experiments/cfg_meta_guidance.sh" "$tmp/out2" -1 > "$tmp/log2" 2>&1
check "a failing generate run: exit 1, one line, no table" \
  eval '[ $? -eq 1 ] && [ $(wc -l < "$tmp/log2") -eq 1 ] && grep -q "guidance -1, prompt cockatoo failed: dsgap: error: bad --guidance" "$tmp/log2" && [ ! -e "$tmp/out2/cfg_meta_guidance.md" ]'
finish
