#!/usr/bin/env bash
# cli_compare_matched.sh: dsgap compare over runs of several schedules, on hand-made run folders whose
# answers are known: rows keyed by schedule (a refresh=step policy's repeats under anchor-only variants
# counted once), speedups projected from step costs fitted to speed runs of another step count
# (t_dense 1, mc-sparse's anchor step 2 and reuse step 0.5, est-block's sparse step 0.4: worked out
# below by hand; a first sparse step's one-off cost from run.json counted once), matched.csv's picks at each speedup and density, and its paired difference (the
# mean of the per-sample differences).
# Run: ctest -R cli_compare_matched (needs $DSGAP).
. "$(dirname "$0")/../lib.sh" compare_matched
run() { # DIR STEPS WARMUP ANCHORS [DENSE_LAYERS] (json lists) then rows "prompt,seed,policy,rho,density,psnr,time" on stdin
  mkdir -p "$1"
  printf '{"format": "dsgap-closed-loop", "device": "cpu: test", "model": {"label": "t", "steps": %d},\n "schedule": {"label": "s", "warmup": %d, "anchors": %s, "dense_layers": %s}}\n' \
    "$2" "$3" "$4" "${5:-[]}" > "$1/run.json"
  { echo "prompt,seed,policy,density_target,density,psnr,ssim,psnr_min,ssim_min,transformer_s,total_s,speedup,rel_l2"
    awk -F, -v OFS=, '{ print $1, $2, $3, $4, $5, $6, 0.5, $6, 0.5, $7, $7, 1, 0.1 }'; } > "$1/closed_loop.csv"
}
# fidelity: 50 steps, warm-up 10; one anchor (9) or every 10 (9..49); 3 samples
run "$tmp/f_once" 50 10 '[9]' <<'R'
a,1,dense,1,1,inf,1
b,1,dense,1,1,inf,1
c,1,dense,1,1,inf,1
a,1,mc-sparse,0.15,0.32,20,1
b,1,mc-sparse,0.15,0.32,22,1
c,1,mc-sparse,0.15,0.32,24,1
a,1,est-block,0.15,0.32,25,1
b,1,est-block,0.15,0.32,26,1
c,1,est-block,0.15,0.32,27,1
R
run "$tmp/f_e10" 50 10 '[9, 19, 29, 39, 49]' <<'R'
a,1,dense,1,1,inf,1
b,1,dense,1,1,inf,1
c,1,dense,1,1,inf,1
a,1,mc-sparse,0.15,0.39,30,1
b,1,mc-sparse,0.15,0.39,31,1
c,1,mc-sparse,0.15,0.39,35,1
a,1,est-block,0.15,0.32,25,1
b,1,est-block,0.15,0.32,26,1
c,1,est-block,0.15,0.32,27,1
R
# speed: 10 steps, warm-up 2; one anchor (1) or every step (1..9). t_d = 10 / 10 = 1;
# mc-sparse: once 1 + t_a + 8 t_r = 7, all 1 + 9 t_a = 19 (t_a 2, t_r 0.5); est-block 2 + 8 * 0.4 = 5.2
run "$tmp/s_once" 10 2 '[1]' <<'R'
x,1,dense,1,1,inf,10
x,1,mc-sparse,0.15,0.3,0,7
x,1,est-block,0.15,0.3,0,5.2
R
run "$tmp/s_all" 10 2 '[1, 2, 3, 4, 5, 6, 7, 8, 9]' <<'R'
x,1,dense,1,1,inf,10
x,1,mc-sparse,0.15,0.9,0,19
R
"$DSGAP" compare "$tmp/f_once" "$tmp/f_e10" --speed "$tmp/s_once" --speed "$tmp/s_all" --out "$tmp/out" --boot 200 \
  --at-speedup 1.5,1.8 --at-density 0.35,0.4 > "$tmp/log" 2>&1
check "compare: exit 0" [ $? -eq 0 ] || cat "$tmp/log"
csv=$tmp/out/comparison.csv m=$tmp/out/matched.csv
# the rows: dense, mc-sparse under two schedules, est-block once (its repeat under e10 counted once)
row() { awk -F, -v p="$1" -v s="$2" 'NR > 1 && $1 == p && $20 == s' "$csv"; }
check "one row per policy x schedule; est-block's repeat counted once (3 samples)" \
  eval '[ "$(wc -l < "$csv")" -eq 5 ] && [ "$(row est-block w10 | cut -d, -f4)" = 3 ]'
check "mc-sparse's schedules written as they act: w10 once, w10 every:10" \
  eval '[ -n "$(row mc-sparse "w10 once")" ] && [ -n "$(row mc-sparse "w10 every:10")" ]'
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'; }
# projected at 50 steps: once 9 dense + 1 anchor + 40 reuse = 9 + 2 + 20 = 31 (50 / 31);
# every:10: 9 + 5 * 2 + 36 * 0.5 = 37 (50 / 37); est-block 10 + 40 * 0.4 = 26 (50 / 26)
sp() { row "$1" "$2" | cut -d, -f17; }
check "projected speedups: mc-sparse once 50/31, every:10 50/37, est-block 50/26" \
  eval 'near "$(sp mc-sparse "w10 once")" 1.612903 && near "$(sp mc-sparse "w10 every:10")" 1.351351 && near "$(sp est-block w10)" 1.923077'
check "every projected row flagged speed_projected" [ "$(awk -F, 'NR > 1 && $1 != "dense" && $24 != 1' "$csv" | wc -l)" -eq 0 ]
check "PSNR means: mc-sparse every:10 32, once 22" \
  eval 'near "$(row mc-sparse "w10 every:10" | cut -d, -f8)" 32 && near "$(row mc-sparse "w10 once" | cut -d, -f8)" 22'
pick() { awk -F, -v k="$1" -v t="$2" -v p="$3" 'NR > 1 && $1 == k && $2 + 0 == t + 0 && $3 == p { print $4 "|" $10 "|" $13 }' "$m"; }
# at speedup >= 1.5: mc-sparse only once (1.61) qualifies (22), est-block (1.92) 26: best est-block,
# paired difference est-block - mc-sparse = mean(5, 4, 3) = 4; at >= 1.8 est-block alone
check "matched speed 1.5: mc-sparse's once row, est-block best" \
  eval '[ "$(pick speedup 1.5 mc-sparse)" = "w10 once|22|0" ] && [ "$(pick speedup 1.5 est-block)" = "w10|26|1" ]'
check "matched speed 1.5: best - next = 4 (the mean of the per-sample differences)" \
  near "$(awk -F, 'NR > 1 && $1 == "speedup" && $2 == 1.5 && $13 == 1 { print $14 }' "$m")" 4
check "matched speed 1.8: est-block alone" eval '[ -z "$(pick speedup 1.8 mc-sparse)" ] && [ -n "$(pick speedup 1.8 est-block)" ]'
# at density <= 0.35 mc-sparse once (0.32); at <= 0.4 every:10 (0.39, 32 dB) beats est-block by 6
check "matched density: mc-sparse once at 0.35, every:10 at 0.4, best - next 6" \
  eval '[ "$(pick density 0.35 mc-sparse)" = "w10 once|22|0" ] && [ "$(pick density 0.4 mc-sparse)" = "w10 every:10|32|1" ] &&
    near "$(awk -F, '"'"'NR > 1 && $1 == "density" && $2 == 0.4 && $13 == 1 { print $14 }'"'"' "$m")" 6'
check "matched.md and matched.tex written" eval '[ -s "$tmp/out/matched.md" ] && grep -q "table\*" "$tmp/out/matched.tex"'
# one speed schedule only: a refresh=anchor policy's anchor and reuse costs are not separated: no speedup
"$DSGAP" compare "$tmp/f_once" "$tmp/f_e10" --speed "$tmp/s_once" --out "$tmp/out1" --boot 50 > /dev/null 2>&1
check "one speed schedule: mc-sparse not projected (nan), est-block still 50/26" \
  eval '[ "$(awk -F, '"'"'NR > 1 && $1 == "mc-sparse" { print $17 }'"'"' "$tmp/out1/comparison.csv" | sort -u)" = nan ] &&
    near "$(awk -F, '"'"'NR > 1 && $1 == "est-block" { print $17 }'"'"' "$tmp/out1/comparison.csv")" 1.923077'
# dense layers: a speed run with layer 0 dense adds t_l per dense layer to each sparse step (0.25 here:
# mc-sparse 1 + 2 + 8 * 0.75 = 9, est-block 2 + 8 * 0.65 = 7.2); projected at 50 steps, warm-up 10,
# layer 0 dense: mc-sparse 9 + 2 + 40 * 0.75 = 41 (50 / 41), est-block 10 + 40 * 0.65 = 36 (50 / 36)
run "$tmp/f_dl0" 50 10 '[9]' '[0]' <<'R'
a,1,dense,1,1,inf,1
a,1,mc-sparse,0.15,0.35,25,1
a,1,est-block,0.15,0.35,27,1
R
run "$tmp/s_dl0" 10 2 '[1]' '[0]' <<'R'
x,1,dense,1,1,inf,10
x,1,mc-sparse,0.15,0.4,0,9
x,1,est-block,0.15,0.4,0,7.2
R
dl0() { awk -F, -v p="$2" 'NR > 1 && $1 == p { print $20 "|" $17 }' "$1/comparison.csv"; }
"$DSGAP" compare "$tmp/f_dl0" --speed "$tmp/s_once" --speed "$tmp/s_all" --speed "$tmp/s_dl0" --out "$tmp/out4" --boot 50 > /dev/null 2>&1
check "dense layers projected: mc-sparse 50/41, est-block 50/36" \
  eval 'near "$(dl0 "$tmp/out4" mc-sparse | grep "^w10 once dl=0|" | cut -d"|" -f2)" 1.219512 &&
    near "$(dl0 "$tmp/out4" est-block | grep "^w10 dl=0|" | cut -d"|" -f2)" 1.388889'
"$DSGAP" compare "$tmp/f_dl0" --speed "$tmp/s_once" --speed "$tmp/s_all" --out "$tmp/out5" --boot 50 > /dev/null 2>&1
check "dense layers with no speed run of a dense layer: not projected (nan)" \
  eval '[ "$(dl0 "$tmp/out5" mc-sparse | cut -d"|" -f2)" = nan ] && [ "$(dl0 "$tmp/out5" est-block | cut -d"|" -f2)" = nan ]'
# a per-step policy's first sparse step costing more once (svg2's first k-means): with the speed run's
# run.json giving that extra (1.5 s), est-block's 10-step time 2 + 1.5 + 8 * 0.4 = 6.7 projects to
# 10 + 1.5 + 40 * 0.4 = 27.5 at 50 steps (50 / 27.5); without it the extra would be spread over every
# sparse step: 10 + 40 * (4.7 / 8) = 33.5 (50 / 33.5)
run "$tmp/s_first" 10 2 '[1]' <<'R'
x,1,dense,1,1,inf,10
x,1,est-block,0.15,0.3,0,6.7
R
sed -i 's/}}$/}, "first_sparse_extra_s": [{"policy": "est-block", "density_target": 0.15, "seconds": 1.5, "samples": 1}]}/' "$tmp/s_first/run.json"
"$DSGAP" compare "$tmp/f_once" --speed "$tmp/s_first" --out "$tmp/out6" --boot 50 > "$tmp/out6.log" 2>&1
check "a first sparse step's one-off cost counted once: est-block 50/27.5" \
  near "$(awk -F, 'NR > 1 && $1 == "est-block" { print $17 }' "$tmp/out6/comparison.csv")" 1.818182 || cat "$tmp/out6.log"
sed -i 's/"seconds": 1.5/"seconds": "x"/' "$tmp/s_first/run.json"
refused "first_sparse_extra_s without a number" "first_sparse_extra_s" "$tmp/out7" "$DSGAP" compare "$tmp/f_once" --speed "$tmp/s_first" --out "$tmp/out7"
# a sample twice inside one run is refused
{ cat "$tmp/f_once/closed_loop.csv"; tail -1 "$tmp/f_once/closed_loop.csv"; } > "$tmp/dup.csv"
mkdir -p "$tmp/f_dup" && cp "$tmp/f_once/run.json" "$tmp/f_dup/" && mv "$tmp/dup.csv" "$tmp/f_dup/closed_loop.csv"
refused "a sample twice in one run" "again" "$tmp/out2" "$DSGAP" compare "$tmp/f_dup" --out "$tmp/out2"
refused "a bad --at-speedup" "at-speedup" "$tmp/out3" "$DSGAP" compare "$tmp/f_once" --out "$tmp/out3" --at-speedup 2,1.5
finish
