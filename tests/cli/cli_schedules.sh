#!/usr/bin/env bash
# cli_schedules.sh: schedule families and axes (issue 50): anchors=every:N and once,
# dense_layers=none, a [schedules] entry with axes expanded into labelled schedules; schedules the
# run does not fit refused before any work (dsgap run, replay, generate); a closed-loop sweep on
# the tiny random-weight Wan model (the wan_models fixture) that computes the dense reference once
# and an anchor-independent (refresh=step) cell once for schedules that differ only in anchors
# (counted: the generations in cells/), gives the same latents (h5diff, exact) as the same cells
# run one by one (one process each, a fresh model load each), and carries the schedule's columns.
# Run: ctest -R cli_schedules (needs $DSGAP, $DSGAP_SOURCE and the wan_models fixture).
. "$(dirname "$0")/../lib.sh" schedules
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }
command -v h5diff > /dev/null || { echo "no h5diff"; exit 77; }

# 384 tokens, 3 UniPC steps with CFG, one sample; the model has 2 layers
M='[model]\npath = '"$MODELS"'/orig_hd64\nlatent = 4x16x24\nsteps = 3\nshift = 3\nguidance = 2\nseeds = 3\n'
P="[prompts]\nfix = $FIX/text.safetensors\n[policies]\nlist = mc-sparse, est-block\n[densities]\nlist = 0.3\n"

# --- axes: the cross product, labels, what is shared ---------------------------------------------------
printf '%b' "${M}${P}[schedules]\nsweep = warmup=1|2,anchors=once|every:1,dense_layers=none|1\n" > "$tmp/ax.ini"
"$DSGAP" run "$tmp/ax.ini" --out "$tmp/ax" --list > "$tmp/ax.txt" 2> "$tmp/ax.err"
check "axes: 2 x 2 x 2 = 8 runs of 3 cells; 13 generations (1 dense, 8 mc-sparse, 4 est-block)" \
  grep -q "8 runs of 1 prompt x 1 seed, 24 cells, 13 generations (11 shared between schedules)" "$tmp/ax.err"
check "axes: labels LABEL.wW.{once,eN}.dl{none,L}, first key slowest" \
  eval '[ "$(cut -d" " -f2 "$tmp/ax.txt" | cut -d/ -f1 | uniq | tr "\n" " ")" = "model.sweep.w1.once.dlnone model.sweep.w1.once.dl1 model.sweep.w1.e1.dlnone model.sweep.w1.e1.dl1 model.sweep.w2.once.dlnone model.sweep.w2.once.dl1 model.sweep.w2.e1.dlnone model.sweep.w2.e1.dl1 " ]'
check "axes: --list names only the cells computed (the dense reference once)" \
  [ "$(grep -c '\.dense$' "$tmp/ax.txt")" -eq 1 -a "$(wc -l < "$tmp/ax.txt")" -eq 13 ]

# --- a sweep run: shared cells, the same latents as one by one ---------------------------------------
printf '%b' "${M}${P}[schedules]\nsw = warmup=1,anchors=once|every:1\n" > "$tmp/sw.ini"
"$DSGAP" run "$tmp/sw.ini" --out "$tmp/sw" > /dev/null 2> "$tmp/sw.err"
check "sweep: exit 0" [ $? -eq 0 ] || cat "$tmp/sw.err"
gens=$(find "$tmp/sw/cells" -name run.json | wc -l)
check "sweep: 4 generations for 6 cells (dense and est-block once, mc-sparse per schedule): $gens" [ "$gens" -eq 4 ]
check "sweep: one model load for the process's 4 generations" \
  [ "$(grep -l '"model_reused":[[:space:]]*false' $(find "$tmp/sw/cells" -name run.json) | wc -l)" -eq 1 ]
for r in once e1; do
  csv=$tmp/sw/model.sw.$r/closed_loop.csv
  check "sweep: run $r lists every row (dense, mc-sparse, est-block)" [ "$(wc -l < "$csv")" -eq 4 ]
done
check "closed_loop.csv: the schedule's columns (warmup, anchor_every, anchors, dense_layers)" \
  eval '[ "$(head -1 "$tmp/sw/model.sw.e1/closed_loop.csv" | cut -d, -f14-)" = "warmup,anchor_every,anchors,dense_layers" ] &&
        [ "$(sed -n 2p "$tmp/sw/model.sw.e1/closed_loop.csv" | cut -d, -f14-)" = "1,1,0;1;2,none" ] &&
        [ "$(sed -n 2p "$tmp/sw/model.sw.once/closed_loop.csv" | cut -d, -f14-)" = "1,once,0,none" ]'
check "summary.csv: anchor_every and dense_layers per line" \
  eval '[ "$(grep -c ",1,none$" "$tmp/sw/summary.csv")" -eq 3 -a "$(grep -c ",once,none$" "$tmp/sw/summary.csv")" -eq 3 ]'
check "est-block (refresh=step) is the same in both runs; mc-sparse is not" \
  eval '[ "$(grep est-block "$tmp/sw/model.sw.once/closed_loop.csv" | cut -d, -f5-9,13)" = "$(grep est-block "$tmp/sw/model.sw.e1/closed_loop.csv" | cut -d, -f5-9,13)" ] &&
        [ "$(grep mc-sparse "$tmp/sw/model.sw.once/closed_loop.csv" | cut -d, -f5-9,13)" != "$(grep mc-sparse "$tmp/sw/model.sw.e1/closed_loop.csv" | cut -d, -f5-9,13)" ]'
"$DSGAP" run "$tmp/sw.ini" --out "$tmp/sw" 2> "$tmp/rerun.err" > /dev/null
check "sweep: a rerun has nothing to do" grep -q "4 of 4 cells already done, 0 to run" "$tmp/rerun.err"

# the same cells one by one: the anchors-every-step schedule alone, each cell its own process
printf '%b' "${M}${P}[schedules]\nb = warmup=1,anchors=every:1\n" > "$tmp/one.ini"
for i in 0 1 2; do "$DSGAP" run "$tmp/one.ini" --out "$tmp/one" --shard $i/3 --quiet; done
check "one by one: 3 processes of one cell each" [ "$(find "$tmp/one/cells" -name run.json | wc -l)" -eq 3 ]
"$DSGAP" merge "$tmp/one" --out "$tmp/one_m" --quiet
same=0
for c in dense est-block@0.3 mc-sparse@0.3; do
  src=once; [ "$c" = mc-sparse@0.3 ] && src=e1
  h5diff "$tmp/sw/cells/model.sw.$src/fix.s3.$c/latents.h5" "$tmp/one/cells/model.b/fix.s3.$c/latents.h5" /latents \
    > /dev/null && same=$((same + 1))
done
check "the sweep's latents (shared or not, one model load) = one by one (h5diff, exact): $same of 3" [ $same -eq 3 ]
check "the sweep's rows of run e1 = the one-by-one rows" \
  cmp -s <(cut -d, -f1-9,13- "$tmp/sw/model.sw.e1/closed_loop.csv") <(cut -d, -f1-9,13- "$tmp/one_m/model.b/closed_loop.csv")

# an output folder made before cells were shared (each run holds its own cells, experiment.json
# names no source_run) still merges, to the same rows
cp -r "$tmp/sw" "$tmp/old"
for c in dense est-block@0.3; do cp -r "$tmp/old/cells/model.sw.once/fix.s3.$c" "$tmp/old/cells/model.sw.e1/"; done
python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
for r in j["runs"]:
    for c in r["cell_info"]:
        c.pop("source_run", None), c.pop("reference_run", None)
json.dump(j, open(sys.argv[1], "w"), indent=1)' "$tmp/old/experiment.json"
"$DSGAP" merge "$tmp/old" --out "$tmp/old_m" --quiet
check "an older folder (no shared cells) merges to the same rows" \
  cmp -s <(cut -d, -f1-9,13- "$tmp/sw/model.sw.e1/closed_loop.csv") <(cut -d, -f1-9,13- "$tmp/old_m/model.sw.e1/closed_loop.csv")

# --- bad schedules: one line naming FILE:LINE, nothing written -----------------------------------------
S="${M}${P}[schedules]\n" # the schedule is line 15
bad_ini "an axis with an empty value" "$tmp/bad.ini:15: schedule 'x': axis warmup has an empty value" "${S}x = warmup=1|\n"
bad_ini "an axis that expands to nothing" "$tmp/bad.ini:15: schedule 'x': axis anchors has an empty value" "${S}x = anchors=|\n"
bad_ini "an axis repeating a value" "$tmp/bad.ini:15: schedule 'x': the axes give the label x.w1 twice" "${S}x = warmup=1|1\n"
bad_ini "dense layer past the model's layers" "$tmp/bad.ini:15: schedule 'x': dense layer 99 is not a layer of the model (its 2 layers" \
  "${S}x = dense_layers=99\n"
bad_ini "a dense layer of an axis past the model's" "$tmp/bad.ini:15: schedule 'x.dl5': dense layer 5 is not a layer" \
  "${S}x = dense_layers=0|5\n"
bad_ini "warm-up over every step" "$tmp/bad.ini:15: schedule 'x': warmup=3 covers every one of the 3 denoising steps" "${S}x = warmup=3\n"
bad_ini "anchors every 0 steps" "$tmp/bad.ini:15: schedule 'x': bad anchors 'every:0'" "${S}x = anchors=every:0\n"
T='[traces]\nt = synth: grid=2x8x16 heads=2 layers=1 steps=3 head_dim=32\n[schedules]\n'
bad_ini "open loop: dense layer the trace lacks" "$tmp/bad.ini:4: schedule 'x' on trace 't': dense layer 99 is not in the trace (its layers: 0)" "${T}x = dense_layers=99\n"
bad_ini "open loop: warm-up past the trace's steps" "$tmp/bad.ini:4: schedule 'x' on trace 't': warmup=5 covers every step of the trace" "${T}x = warmup=5\n"

# --- replay and generate ----------------------------------------------------------------------------------
"$DSGAP" synth --grid 2x8x16 --heads 2 --layers 1 --steps 8 --head-dim 32 --out "$tmp/t.h5" > /dev/null 2>&1
"$DSGAP" replay "$tmp/t.h5" --policies mc-sparse --density 0.3 --schedule warmup=1,anchors=every:3 --out "$tmp/rp" --quiet
check "replay anchors=every:3 after warm-up 1: anchors 0, 3, 6" \
  eval '/opt/dsgap-venv/bin/python -c "import json,sys; sys.exit(json.load(open(\"$tmp/rp/run.json\"))[\"schedule\"][\"anchors\"] != [0, 3, 6])" 2>/dev/null ||
        [ "$(tr -d " \n" < "$tmp/rp/run.json" | grep -o "\"anchors\":\[[0-9,]*\]" | head -1)" = "\"anchors\":[0,3,6]" ]'
refused "replay: a dense layer the trace lacks" "dense layer 99 is not in the trace" "$tmp/rp2" \
  "$DSGAP" replay "$tmp/t.h5" --policies mc-sparse --schedule dense_layers=99 --out "$tmp/rp2"
G=(--model "$MODELS/orig_hd64" --text "$FIX/text.safetensors" --latent 4x16x24 --steps 3 --policies mc-sparse)
refused "generate: warm-up over every step" "--schedule 'warmup=3': warmup=3 covers every one of the 3 denoising steps" "$tmp/g" \
  "$DSGAP" generate "${G[@]}" --schedule warmup=3 --out "$tmp/g"
refused "generate: an anchor past the last step" "anchor step 7 is not a step of the 3 denoising steps" "$tmp/g" \
  "$DSGAP" generate "${G[@]}" --schedule anchors=7 --out "$tmp/g"
refused "generate: a dense layer the model lacks" "dense layer 99 is not a layer of the model (its 2 layers" "$tmp/g" \
  "$DSGAP" generate "${G[@]}" --schedule dense_layers=99 --out "$tmp/g"
refused "generate --plan-only: a dense layer the model lacks" "dense layer 2 is not a layer" - \
  "$DSGAP" generate "${G[@]}" --schedule dense_layers=2 --plan-only --out "$tmp/g"

finish
