#!/usr/bin/env bash
# cli_closed_loop.sh: the closed-loop cells of dsgap run (experiment 4, [model] + [prompts]) on the
# tiny random-weight Wan model of the test fixtures (tests/wan_ref.py derive: 2 layers, 2 heads of
# 64): the grid (--list: one dense reference per sample, then policy x density), a full run and
# its closed_loop.csv (the reference is exact, density 1 reproduces it, a sparse policy does not) and
# run.json's first_sparse_extra_s (against the cells' step times);
# resume (finished cells skipped, a killed run's temporary folder removed, a removed cell redone,
# the same rows); shards 0/2 + 1/2 merged and --workers 2 equal the unsharded run but for the
# time columns; merge refuses an incomplete set, and with --partial merges the finished cells whose
# sample's reference is there (rows equal to the full run's; run.json names the rest; an open-loop
# experiment is refused); a changed experiment in the same folder is
# refused; [device] cache_offload = true (--cache-offload: a no-op on the CPU) is the same
# experiment (its fingerprint); bad experiment files (one line naming FILE:LINE, nothing written).
# Run: ctest -R cli_closed_loop (needs $DSGAP, $DSGAP_SOURCE and the wan_models fixture).
. "$(dirname "$0")/../lib.sh" closed
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }
# every column but the measured times (closed_loop.csv: 10-12; summary.csv: the last 2)
same_rows() { cmp -s <(cut -d, -f1-9,13 "$1") <(cut -d, -f1-9,13 "$2"); }
same_summary() { cmp -s <(cut -d, -f1-13 "$1") <(cut -d, -f1-13 "$2"); }

# 384 tokens (4x8x12 after the 1x2x2 patch), 3 UniPC steps with CFG, 2 seeds of one prompt
M='[model]\npath = '"$MODELS"'/orig_hd64\nlatent = 4x16x24\nsteps = 3\nshift = 3\nguidance = 2\n'
printf '%b' "[experiment]\nname = closed\n${M}seeds = 3, 4\n[prompts]\nfix = $FIX/text.safetensors\n[policies]
list = dense, mc-sparse, ditfastattn/window=64\n[densities]\nlist = 0.3, 1\n[schedules]\nw1 = warmup=1\n" > "$tmp/c.ini"
run=model.w1

# --- the grid -------------------------------------------------------------------------------------
"$DSGAP" run "$tmp/c.ini" --out "$tmp/full" --list > "$tmp/list.txt" 2> "$tmp/list.err"
check "--list: 2 samples x (dense + 2 policies x 2 densities) = 10 cells" [ "$(wc -l < "$tmp/list.txt")" -eq 10 ]
check "--list: the sample's reference first" grep -qx "0 $run/fix.s3.dense" "$tmp/list.txt"
check "--list: then policy x density ('/' in a spec made '_')" grep -qx "4 $run/fix.s3.ditfastattn_window=64@1" "$tmp/list.txt"
check "--list writes nothing" [ ! -e "$tmp/full" ]

# --- a full run -----------------------------------------------------------------------------------
"$DSGAP" run "$tmp/c.ini" --out "$tmp/full" > /dev/null 2> "$tmp/full.err"
check "run: exit 0" [ $? -eq 0 ] || cat "$tmp/full.err"
csv=$tmp/full/$run/closed_loop.csv
check "closed_loop.csv: header and 10 rows" [ "$(head -1 "$csv")" = \
  "prompt,seed,policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup,rel_l2,warmup,anchor_every,anchors,dense_layers" -a "$(wc -l < "$csv")" -eq 11 ]
check "the reference rows: psnr inf, ssim 1, density 1, speedup 1, rel_l2 0" \
  [ "$(awk -F, '$3 == "dense" && $6 == "inf" && $7 == 1 && $5 == 1 && $12 == 1 && $13 == 0' "$csv" | wc -l)" -eq 2 ]
check "mc-sparse at density 1 reproduces the reference (psnr > 90, rel_l2 < 1e-4), at 0.3 it does not" \
  [ "$(awk -F, '$3 == "mc-sparse" && (($4 == 1 && $6 > 90 && $13 < 1e-4) || ($4 == 0.3 && $6 < 90 && $5 < 0.9 && $7 < 1 && $13 > 1e-3))' "$csv" | wc -l)" -eq 4 ]
check "summary.csv: one line per policy x density (+ header)" [ "$(wc -l < "$tmp/full/summary.csv")" -eq 6 ]
check "summary.md and experiment.json written" [ -s "$tmp/full/summary.md" -a -s "$tmp/full/experiment.json" ]
check "run.json: first_sparse_extra_s per policy and density = the cells' first step past the warm-up minus the later steps' mean" \
  python3 - "$tmp/full" "$run" <<'PY'
import glob, json, os, sys
out, run = sys.argv[1:]
got = {(e["policy"], e["density_target"]): (e["seconds"], e["samples"])
       for e in json.load(open(os.path.join(out, run, "run.json")))["first_sparse_extra_s"]}
want = {}
for c in glob.glob(os.path.join(out, "cells", run, "*", "run.json")):
    j = json.load(open(c))
    if j["policy"] == "dense":
        continue
    s = j["step_s"]  # warm-up 1 of 3 steps: step 1 against the mean of step 2
    want.setdefault((j["policy"], j["density_target"]), []).append(s[1] - sum(s[2:]) / len(s[2:]))
ok = len(want) == 4 and set(got) == set(want) and all(
    abs(got[k][0] - sum(v) / len(v)) < 1e-9 and got[k][1] == len(v) for k, v in want.items())
sys.exit(0 if ok else 1)
PY
check "each cell holds latents.h5 and run.json" [ -s "$tmp/full/cells/$run/fix.s4.mc-sparse@0.3/latents.h5" \
  -a -s "$tmp/full/cells/$run/fix.s4.mc-sparse@0.3/run.json" ]

# --- resume ---------------------------------------------------------------------------------------
cp "$csv" "$tmp/first.csv"
"$DSGAP" run "$tmp/c.ini" --out "$tmp/full" 2> "$tmp/rerun.err" > /dev/null
check "a rerun skips every finished cell" grep -q "10 of 10 cells already done, 0 to run" "$tmp/rerun.err"
rm -rf "$tmp/full/cells/$run/fix.s4.mc-sparse@0.3"
mkdir "$tmp/full/cells/$run/.fix.s4.mc-sparse@0.3.tmp.host.999999" # left by a killed process
touch "$tmp/full/cells/$run/.fix.s4.mc-sparse@0.3.tmp.host.999999/latents.h5"
"$DSGAP" run "$tmp/c.ini" --out "$tmp/full" 2> "$tmp/resume.err" > /dev/null
check "resume: runs only the missing cell" grep -q "9 of 10 cells already done, 1 to run" "$tmp/resume.err"
check "resume: the killed run's temporary folder is gone" [ -z "$(ls -A "$tmp/full/cells/$run" | grep tmp)" ]
check "resume: the same rows" same_rows "$tmp/first.csv" "$csv"

# --- shards, merge, workers -----------------------------------------------------------------------
"$DSGAP" run "$tmp/c.ini" --out "$tmp/s0" --shard 0/2 --quiet && "$DSGAP" run "$tmp/c.ini" --out "$tmp/s1" --shard 1/2 --quiet
check "shards run" [ $? -eq 0 ]
"$DSGAP" merge "$tmp/s0" --out "$tmp/bad_merge" 2> "$tmp/merge1.err"
st=$?
check "merge refuses an incomplete set of cells and writes nothing" \
  [ $st -ne 0 -a ! -e "$tmp/bad_merge/summary.csv" ]
check "merge: the refusal names the count and --partial" grep -q "cells are missing.*--partial" "$tmp/merge1.err"
"$DSGAP" merge "$tmp/s0" --out "$tmp/part" --partial 2> "$tmp/part.err"
check "merge --partial: exit 0" [ $? -eq 0 ]
check "merge --partial: a warning naming the count" \
  grep -q "5 of 10 cells are missing (the first: $run/fix.s3.mc-sparse@0.3): merged without them" "$tmp/part.err"
check "merge --partial: a warning naming the cells left out of the run" \
  grep -q "run $run: 7 of 10 cells left out" "$tmp/part.err"
# shard 0/2 holds cells 0 2 4 6 8: sample s3's reference (0) and two of its policies (mc-sparse and
# ditfastattn at 1); s4's policies (6, 8) without their reference (5) are left out
check "merge --partial: the rows of the finished cells with their reference, as in the full run" \
  same_rows <(grep -e '^prompt,' -e '^fix,3,dense,' -e '^fix,3,mc-sparse,1,' -e '^fix,3,ditfastattn/window=64,1,' "$csv") \
  "$tmp/part/$run/closed_loop.csv"
check "merge --partial: 3 rows, run.json names the 7 cells left out" \
  [ "$(wc -l < "$tmp/part/$run/closed_loop.csv")" -eq 4 -a "$(python3 -c 'import json,sys
print(len(json.load(open(sys.argv[1]))["experiment"]["cells_missing"]))' "$tmp/part/$run/run.json")" = 7 ]
printf '[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=4 head_dim=32\n[policies]\nlist = mc-sparse\n[densities]\nlist = 0.3\n' > "$tmp/o.ini"
"$DSGAP" run "$tmp/o.ini" --out "$tmp/o0" --shard 0/2 --quiet && "$DSGAP" merge "$tmp/o0" --out "$tmp/o_part" --partial 2> "$tmp/o.err"
st=$?
check "merge --partial of an open-loop experiment is refused, nothing written" [ $st -ne 0 -a ! -e "$tmp/o_part/summary.csv" ]
check "merge --partial of an open-loop experiment: the reason" grep -q "partial merges only a closed-loop experiment" "$tmp/o.err"
"$DSGAP" merge "$tmp/s0" "$tmp/s1" --out "$tmp/merged" --quiet
check "merge of 2 shards = the unsharded run (closed_loop.csv)" same_rows "$csv" "$tmp/merged/$run/closed_loop.csv"
check "merge of 2 shards = the unsharded run (summary.csv)" same_summary "$tmp/full/summary.csv" "$tmp/merged/summary.csv"
"$DSGAP" run "$tmp/c.ini" --out "$tmp/w2" --workers 2 --quiet
check "--workers 2 = one process" same_rows "$csv" "$tmp/w2/$run/closed_loop.csv"
printf '[device]\ncache_offload = true\n' | cat "$tmp/c.ini" - > "$tmp/coff.ini"
"$DSGAP" run "$tmp/coff.ini" --out "$tmp/full" 2> "$tmp/coff.err" > /dev/null
check "[device] cache_offload = true: the same experiment (its cells already done)" \
  grep -q "10 of 10 cells already done, 0 to run" "$tmp/coff.err"
sed 's/^steps = 3/steps = 4/' "$tmp/c.ini" > "$tmp/c4.ini"
"$DSGAP" run "$tmp/c4.ini" --out "$tmp/full" 2> "$tmp/fp.err" > /dev/null
check "a changed experiment in the same folder is refused" grep -q "was made by another experiment" "$tmp/fp.err"

# --- bad experiment files -------------------------------------------------------------------------
P="[prompts]\nfix = $FIX/text.safetensors\n"
bad_ini "traces and a model" "$tmp/bad.ini:2: [traces] with [model]" \
  "[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=4 head_dim=32\n${M}${P}"
bad_ini "no model path" "$tmp/bad.ini:2: [model] path = the checkpoint folder is required" "[model]\nlatent = 2x8x8\n${P}"
bad_ini "model folder missing" "$tmp/bad.ini:2: [model] path: cannot open $tmp/nowhere" "[model]\npath = nowhere\n${P}"
bad_ini "bad latent" "$tmp/bad.ini:3: [model] bad latent '4x16'" "[model]\npath = $MODELS/orig_hd64\nlatent = 4x16\n${P}"
bad_ini "unknown key" "$tmp/bad.ini:3: unknown key 'stpes' in [model]" "[model]\npath = $MODELS/orig_hd64\nstpes = 3\n${P}"
bad_ini "bad seed" "$tmp/bad.ini:7: [model] seeds: '-1' is not a seed" "${M}seeds = -1\n${P}"
bad_ini "no prompts" "$tmp/bad.ini:2: no prompts" "${M}"
bad_ini "prompt file missing" "$tmp/bad.ini:9: prompt 'x': cannot open $tmp/none.safetensors" "${M}${P}x = none.safetensors:text\n"
bad_ini "cache_offload not a boolean" "$tmp/bad.ini:10: [device] cache_offload is true or false, not 'yes'" \
  "${M}${P}[device]\ncache_offload = yes\n"
bad_ini "cache_offload in a replay experiment" \
  "$tmp/bad.ini:4: [device] cache_offload is for a closed-loop experiment ([model] and [prompts])" \
  "[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=4 head_dim=32\n[device]\ncache_offload = true\n"
bad_ini "anchor after the last step" "$tmp/bad.ini:10: schedule 'a': anchor step 5 is not a step of the 3" \
  "${M}${P}[schedules]\na = warmup=1,anchors=5\n"

finish
