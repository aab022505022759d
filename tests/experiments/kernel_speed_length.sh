#!/usr/bin/env bash
# kernel_speed_length.sh: speed against sequence length (issue 23 item 3) without a GPU.
#  1. experiments/kernel_speed_length.sh on synthetic CSVs in the formats of dsgap callspeed and
#     scripts/gpu_bench_torch.py --sweep, with known crossovers: cuDNN dense c N^2 H; policy "slow@0.15"
#     0.15 c N^2 H + 5 H ms (faster than dense above N* = sqrt(5 / (0.85 c)), about 9700 tokens), "fast"
#     always faster, "never" always half as fast; checks the joined speedups, the crossovers (the
#     interpolated N between the measured N around N*, "below 1024", "never"), the tables and figures,
#     and bad input (a missing cuDNN row: one line, nothing written).
#  2. dsgap callspeed --device cpu (the CPU twin of the GPU sweep) on a tiny grid, both paths: its rows,
#     the amortisation (refresh=anchor: call + anchor / K; refresh=step: call), densities near the target,
#     and the analysis end to end on its CSV with a synthetic cuDNN CSV.
# Run: ctest -R kernel_speed_length (needs $DSGAP, $DSGAP_SOURCE).
. "$(dirname "$0")/../lib.sh" kslen
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
S=$DSGAP_SOURCE/experiments/kernel_speed_length.sh
ns="1024 2048 4096 8192 16384 32760 65536 131072"
c=6.3e-8 # ms per N^2 per head
{
  echo "n,heads,d,cudnn_ms,reps,device,date,commit"
  for h in 12 40; do for n in $ns; do awk -v n=$n -v h=$h -v c=$c 'BEGIN { printf "%d,%d,128,%.6g,5,test,2026,x\n", n, h, c * n * n * h }'; done; done
} > "$tmp/cudnn.csv"
{
  echo "path,pv,policy,density_target,n,grid,heads,d,refresh_every,density,dense_ms,call_ms,anchor_ms,amortised_ms,meta_ms,reps,device,date,commit"
  for v in fast precise; do for h in 12 40; do for n in $ns; do
    awk -v n=$n -v h=$h -v c=$c -v v=$v 'BEGIN { d = c * n * n * h * 1.1
      printf "backend,%s,dense,1,%d,1x1x%d,%d,128,1,1,%.6g,%.6g,0,%.6g,0,5,test,2026,x\n", v, n, n, h, d, d, d
      s = 0.15 * c * n * n * h; a = 5 * h * 40 # anchor spread over 40 calls: 5 h ms a call
      printf "backend,%s,slow,0.15,%d,1x1x%d,%d,128,40,%s,%.6g,%.6g,%.6g,%.6g,%.6g,5,test,2026,x\n", v, n, n, h, (n == 1024 ? "0.25" : "0.15"), d, s, a, s + a / 40, a
      printf "backend,%s,fast,0.15,%d,1x1x%d,%d,128,1,0.15,%.6g,%.6g,0,%.6g,%.6g,5,test,2026,x\n", v, n, n, h, d, 0.5 * c * n * n * h, 0.5 * c * n * n * h, 0.1 * c * n * n * h
      printf "backend,%s,never,0.15,%d,1x1x%d,%d,128,1,0.15,%.6g,%.6g,0,%.6g,0,5,test,2026,x\n", v, n, n, h, d, 2 * c * n * n * h, 2 * c * n * n * h
      printf "backend,%s,offb,0.15,%d,1x1x%d,%d,128,1,0.45,%.6g,%.6g,0,%.6g,0,5,test,2026,x\n", v, n, n, h, d, 0.2 * c * n * n * h, 0.2 * c * n * n * h }'
  done; done; done
} > "$tmp/calls.csv"
bash "$S" "$tmp/calls.csv" "$tmp/cudnn.csv" "$tmp/out" 2> "$tmp/err"
check "analysis: exit 0" [ $? -eq 0 ] || cat "$tmp/err"
x=$tmp/out/crossover.csv
check "length.csv: every row joined (2 modes x 2 heads x 8 N x 5 policies)" [ "$(($(wc -l < "$tmp/out/length.csv") - 1))" -eq 160 ]
check "speedup = cudnn_ms / amortised_ms (slow at 32760, 12 heads)" [ "$(awk -F, '$3 == "slow" && $5 == 12 && $6 == 32760 && $2 == "fast" {
  e = 6.3e-8 * 32760 * 32760 * 12 / (0.15 * 6.3e-8 * 32760 * 32760 * 12 + 60); d = $14 - e; print (d < 1e-3 * e && -d < 1e-3 * e) }' "$tmp/out/length.csv")" = 1 ]
rows_ok() { [ "$(($(wc -l < "$x") - 1))" -eq 16 ] && ! grep -q ',dense,' "$x"; }
check "crossover.csv: one row per mode x policy x heads, dense left out" rows_ok
nstar=$(awk 'BEGIN { printf "%.0f", sqrt(5 / (0.85 * 6.3e-8)) }')
check "slow: the crossover between 8192 and 16384, within 15% of N* = $nstar (log-log interpolation)" [ "$(awk -F, -v s=$nstar '$3 == "slow" {
  ok += ($6 > 8192 && $6 < 16384 && $6 > 0.85 * s && $6 < 1.15 * s && $7 == 16384); n++ } END { print ok "/" n }' "$x")" = 4/4 ]
check "fast: below 1024 (wins at every N); never: never" [ "$(awk -F, '($3 == "fast" && $6 == "below 1024") || ($3 == "never" && $6 == "never")' "$x" | wc -l)" -eq 8 ]
check "speedup at 32760 beside each crossover" [ "$(awk -F, '$3 == "fast" && $8 - 2 < 1e-3 && 2 - $8 < 1e-3' "$x" | wc -l)" -eq 4 ]
# matched budgets: offb (density 0.45 for 0.15 everywhere) is off budget: no crossover, "cannot reach ρ", not
# drawn; slow's row at 1024 (0.25) is left out: its n_min is 2048, its crossover unchanged (above)
off_ok() { [ "$(awk -F, '$3 == "offb" && $6 == "off-budget" && $8 == "nan"' "$x" | wc -l)" -eq 4 ] &&
  [ "$(awk -F, '$3 == "slow" && $9 == 2048' "$x" | wc -l)" -eq 4 ] &&
  grep -q '^| `offb` | 0.15 | cannot reach ρ | — |' "$tmp/out/crossover.md" &&
  grep -q '^Off budget .*`slow` (ρ 0.15; 12, 40 heads): 0.250 at 1024[.;]' "$tmp/out/crossover.md" &&
  grep -q '^Off budget .*`offb` (ρ 0.15; 12, 40 heads): 0.450 at 1024, 0.450 at 2048' "$tmp/out/crossover.md" &&
  ! grep -q 'policy offb' "$tmp/out/figures/speed_vs_length-backend-fast.dat" &&
  ! grep -q '^1024 ' <(awk '/policy slow/ { on = 1; next } /^#/ { on = 0 } on' "$tmp/out/figures/speed_vs_length-backend-fast.dat") &&
  grep -q "title 'not drawn, off budget: offb'" "$tmp/out/figures/speed_vs_length-backend-fast.gp"; }
check "off budget (|density - rho| > 0.02): left out of crossovers and figures, named in crossover.md and the key" off_ok
md_ok() { [ "$(grep -c '^## path' "$tmp/out/crossover.md")" -eq 2 ] && grep -q 'crossover N (40 heads)' "$tmp/out/crossover.md" &&
  grep -q '^| `never` | 0.15 | never (to 131072) | 0.500× |' "$tmp/out/crossover.md"; }
check "crossover.md: a table per mode, a column pair per head count" md_ok
# metadata table at 32760, 12 heads: slow 60 ms a call over 40 calls -> 2400 a refresh; fast: 0.1 of 0.5 inside the call
meta_ok() { awk -F'|' '$4 ~ /`slow`/ { s = ($7 + 0 == 2400 && $8 + 0 == 40 && $9 + 0 == 60) } $4 ~ /`fast`/ { f = ($10 + 0 == 0.25) }
  END { exit !(s && f) }' "$tmp/out/crossover.md" && grep -q "^## Metadata beside attention at 32760 tokens, 12 heads" "$tmp/out/crossover.md"; }
check "crossover.md: metadata beside attention at 32760 tokens, 12 heads (per refresh, per call, over attention)" meta_ok
check "crossover.tex: a line per crossover" [ "$(grep -c '\\texttt' "$tmp/out/crossover.tex")" -eq 16 ]
# the tables' numbers: lib.sh's sig3 writes dg_sig3's (tests/analysis/test_bootstrap.c's cases; nan, inf from CSVs)
sig3_ok() ( . "$DSGAP_SOURCE/experiments/lib.sh"
  printf '%s\n' '0.0000985312 0.0000985' '0.12549 0.125' '12.34 12.3' '0.09996 0.100' '-0.0034567 -0.00346' \
    '1234.6 1235' '0 0' '1 1.00' '0.5 0.500' '29892.4 29892' 'nan nan' '-nan nan' 'inf inf' '-inf -inf' |
    awk "$EXP_AWK_SIG3"' sig3($1) != $2 { print "sig3(" $1 ") = " sig3($1) ", want " $2; bad = 1 } END { exit bad }' )
check "lib.sh's EXP_AWK_SIG3 = dg_sig3 (3 significant figures, fixed notation)" sig3_ok
check "crossover.md's tables: no decimal of more than 3 significant figures" awk '
  /^\| / { t = $0; while (match(t, /[0-9]+\.[0-9]+/)) { v = substr(t, RSTART, RLENGTH); t = substr(t, RSTART + RLENGTH)
      d = v; gsub(/\./, "", d); sub(/^0+/, "", d); if (length(d) > 3) { print "too many figures: " v; bad = 1 } } }
  END { exit bad }' "$tmp/out/crossover.md"
check "figure data: a block per heads x policy (dense too) per mode" [ "$(grep -c '^# heads' "$tmp/out/figures/speed_vs_length-backend-fast.dat")" -eq 8 ]
if command -v gnuplot > /dev/null; then
  check "figures rendered (png, pdf) for both modes" [ -s "$tmp/out/figures/speed_vs_length-backend-fast.png" -a -s "$tmp/out/figures/speed_vs_length-backend-precise.pdf" ]
fi
fig_ok() { local g=$tmp/out/figures/speed_vs_length-backend-fast.gp d=$tmp/out/figures/speed_vs_length-backend-fast.dat
  grep -qF 'using 1:($5 == 1 ? NaN : $2) with linespoints' "$g" && grep -qF 'using 1:($5 == 1 ? $2 : NaN) with points' "$g" &&
  awk -v lo="$(sed -n 's/^set yrange \[\([^:]*\):.*/\1/p' "$g")" '!/^#/ && $2 > 0 && (!m || $2 < m) { m = $2 } END { exit !(lo > 0 && lo * 1.5 <= m) }' "$d"; }
check "figures: only steady-state rows joined (reps 1 a point of its own), the y floor 1.5x below the smallest speedup" fig_ok
grep -v '^131072,40,' "$tmp/cudnn.csv" > "$tmp/cudnn-short.csv"
bash "$S" "$tmp/calls.csv" "$tmp/cudnn-short.csv" "$tmp/bad" 2> "$tmp/bad.err"
rc=$?
check "a call without its cuDNN time: exit 1, one line, nothing written" [ $rc -eq 1 -a "$(wc -l < "$tmp/bad.err")" -eq 1 -a ! -e "$tmp/bad" ]

# the reference 'ours' (no cuDNN sweep): each path's own dense rows (1.1 c N^2 H here), so slow's crossover
# moves to sqrt(5 / (0.95 c)); a cuDNN CSV that is gpu_bench_torch.py's one-n benchmark is refused
bash "$S" "$tmp/calls.csv" ours "$tmp/ours" 2> "$tmp/ours.err"
check "ours: exit 0" [ $? -eq 0 ] || cat "$tmp/ours.err"
xo=$tmp/ours/crossover.csv
nours=$(awk 'BEGIN { printf "%.0f", sqrt(5 / (0.95 * 6.3e-8)) }')
check "ours: slow's crossover between 8192 and 16384, within 15% of N* = $nours" [ "$(awk -F, -v s=$nours '$3 == "slow" {
  ok += ($6 > 8192 && $6 < 16384 && $6 > 0.85 * s && $6 < 1.15 * s); n++ } END { print ok "/" n }' "$xo")" = 4/4 ]
check "ours: speedup = dense_ms / amortised_ms (fast at 32760: 1.1 / 0.5 = 2.2)" \
  [ "$(awk -F, '$3 == "fast" && $8 - 2.2 < 1e-3 && 2.2 - $8 < 1e-3' "$xo" | wc -l)" -eq 4 ]
check "ours: the tables name the reference" grep -q "our dense kernel" "$tmp/ours/crossover.md"
printf 'cudnn_ms,11.2,ms,NVIDIA H200,2026,x\n' > "$tmp/onen.csv"
bash "$S" "$tmp/calls.csv" "$tmp/onen.csv" "$tmp/onen" 2> "$tmp/onen.err"
rc=$?
onen_ok() { [ $rc -eq 1 ] && [ "$(wc -l < "$tmp/onen.err")" -eq 1 ] && [ ! -e "$tmp/onen" ] && grep -q "one n" "$tmp/onen.err"; }
check "a one-n benchmark CSV as the sweep: exit 1, one line naming it, nothing written" onen_ok

# experiments/kernel_speed.sh --length: LENGTH_DIR puts the tables (and the two CSVs) in a folder of their
# own under the output, the output's own crossover.csv untouched, and says how to regenerate them
LENGTH_DIR=card2 DSGAP_WORK=$tmp/work bash "$DSGAP_SOURCE/experiments/kernel_speed.sh" --length "$tmp/calls.csv" "$tmp/cudnn.csv" \
  --out "$tmp/wrap" > /dev/null 2>&1
wrap_ok() { [ -s "$tmp/wrap/card2/crossover.csv" ] && [ ! -e "$tmp/wrap/crossover.csv" ] &&
  cmp -s "$tmp/wrap/card2/crossover.csv" "$tmp/out/crossover.csv" && cmp -s "$tmp/wrap/card2/cudnn_length.csv" "$tmp/cudnn.csv" &&
  grep -q 'Regenerate: `LENGTH_DIR=card2 experiments/kernel_speed.sh --length' "$tmp/wrap/card2/crossover.md"; }
check "kernel_speed.sh --length with LENGTH_DIR: its own folder, the same tables" wrap_ok

printf '<!-- who-wins:begin -->\n<!-- who-wins:end -->\n' > "$tmp/README.md"
bash "$DSGAP_SOURCE/experiments/who_wins.sh" --comparison "$tmp/none" --length "$tmp/out" --readme "$tmp/README.md" 2> /dev/null
check "who_wins.sh: a line per mode, the policies that always and never beat dense, those off budget" \
  [ "$(grep -c '^- path `backend`, P·V .*Faster than dense at every N measured at ρ: `fast`\. Never faster: `never`\. Cannot reach ρ .*: `offb`\.$' "$tmp/README.md")" -eq 2 ]
# two sweeps, the newer first: each (path, P.V, heads) from the first that has it, each line naming its
# sweep (folder; device, dates and commit of its callspeed.csv), the others' crossover N listed
mkdir -p "$tmp/sweeps/new"
awk -F, -v OFS=, 'NR > 1 && $3 == "slow" { $6 = 777 } NR == 1 || $2 == "fast"' "$tmp/out/crossover.csv" > "$tmp/sweeps/new/crossover.csv"
printf 'path,pv,policy,density_target,n,grid,heads,d,refresh_every,density,dense_ms,call_ms,anchor_ms,amortised_ms,meta_ms,reps,device,date,commit\n' > "$tmp/sweeps/new/callspeed.csv"
printf 'backend,fast,x,0.15,1024,4x16x16,12,128,1,1,1,1,0,1,0,5,"gpu: NVIDIA H999 (sm_90, 132 SMs, 79 GiB)",2026-01-02T03:04:05Z,abcdef123456+wip\n' >> "$tmp/sweeps/new/callspeed.csv"
printf 'backend,fast,x,0.15,2048,4x16x32,12,128,1,1,1,1,0,1,0,5,"gpu: NVIDIA H999 (sm_90, 132 SMs, 79 GiB)",2026-01-02T05:06:07Z,abcdef123456+wip\n' >> "$tmp/sweeps/new/callspeed.csv"
printf '<!-- who-wins:begin -->\n<!-- who-wins:end -->\n' > "$tmp/R2.md"
bash "$DSGAP_SOURCE/experiments/who_wins.sh" --comparison "$tmp/none" --length "$tmp/sweeps/new" --length "$tmp/out" --readme "$tmp/R2.md" 2> /dev/null
two_ok() { local f=$tmp/R2.md
  [ "$(grep -c '^- path `backend`, P·V fast (NVIDIA H999, 2026-01-02T03:04Z–05:06Z, abcdef1+wip; `.*sweeps/new/`): .*Crossover N of the others: `slow` 777' "$f")" -eq 1 ] &&
  [ "$(grep -c '^- path `backend`, P·V precise (`.*/out/`): ' "$f")" -eq 1 ] && [ "$(grep -c '^- path `backend`, P·V fast' "$f")" -eq 1 ]; }
check "who_wins.sh with two sweeps: each mode from the first that has it, each line naming its sweep" two_ok

# --- 2. dsgap callspeed on the CPU ------------------------------------------------------------------
cs=$tmp/cs.csv
"$DSGAP" callspeed --device cpu --grids 2x8x16,4x8x16 --heads 2 --head-dim 64 --policies mc-sparse,sta/budget=matched \
  --density 0.25 --path both --reps 2 --every 10 --csv "$cs" > "$tmp/cs.log" 2>&1
check "callspeed --device cpu: exit 0" [ $? -eq 0 ] || cat "$tmp/cs.log"
check "callspeed: a row per path x mode x grid x (dense + 2 policies)" [ "$(($(wc -l < "$cs") - 1))" -eq $((3 * 2 * 3)) ]
check "callspeed: refresh=anchor amortised = call + anchor / 10 (every 10), refresh=step = call (every 1)" \
  [ "$(awk -F, 'NR > 1 && $3 != "dense" { e = $12 + ($9 > 1 ? $13 / $9 : 0); d = $14 - e; if (d > 1e-3 * e + 1e-6 || -d > 1e-3 * e + 1e-6) bad++
    if (($3 == "mc-sparse" && $9 != 10) || ($3 == "sta/budget=matched" && $9 != 1)) bad++ } END { print bad + 0 }' "$cs")" -eq 0 ]
check "callspeed: densities of the sparse calls below 1 at 512 tokens, dense rows 1" \
  [ "$(awk -F, 'NR > 1 && (($3 == "dense" && $10 != 1) || ($3 != "dense" && $5 == 512 && !($10 > 0 && $10 < 0.8)))' "$cs" | wc -l)" -eq 0 ]
check "callspeed: metadata of a refresh: mc-sparse's anchor > 0, none for dense" \
  [ "$(awk -F, 'NR > 1 && (($3 == "mc-sparse" && !($15 > 0)) || ($3 == "dense" && $15 != 0))' "$cs" | wc -l)" -eq 0 ]
check "callspeed: every time positive" [ "$(awk -F, 'NR > 1 && !($11 > 0 && $12 > 0 && $14 > 0)' "$cs" | wc -l)" -eq 0 ]
{ echo "n,heads,d,cudnn_ms,reps,device,date,commit"; echo "256,2,64,1,2,test,2026,x"; echo "512,2,64,4,2,test,2026,x"; } > "$tmp/cs-cudnn.csv"
bash "$S" "$cs" "$tmp/cs-cudnn.csv" "$tmp/csout" 2> "$tmp/csout.err"
check "the analysis of callspeed's own CSV: 3 modes, 2 crossovers each" [ $? -eq 0 -a "$(($(wc -l < "$tmp/csout/crossover.csv") - 1))" -eq 6 ] || cat "$tmp/csout.err"
"$DSGAP" callspeed --device cpu --grids 2x8x16,4x8x16 --heads 2 --head-dim 64 --policies mc-sparse --density 0.25 \
  --path both --reps 3 --max-call 0 --csv "$tmp/mc0.csv" > /dev/null 2>&1
check "callspeed --max-call 0: the warm-up's call is the row (reps 1), the policy not run at the larger grid" \
  [ "$(awk -F, 'NR > 1 && $3 == "mc-sparse" { n++; if ($16 != 1 || $5 != 256) bad++ } END { print n "/" bad + 0 }' "$tmp/mc0.csv")" = 3/0 ]
"$DSGAP" callspeed --device cpu --path sideways --csv "$tmp/x.csv" 2> /dev/null
check "callspeed: a bad --path is a usage error, nothing written" [ $? -eq 2 -a ! -e "$tmp/x.csv" ]

finish
