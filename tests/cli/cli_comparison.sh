#!/usr/bin/env bash
# cli_comparison.sh: experiments/comparison.sh end to end on the CPU with a tiny configuration: the
# random-weight Wan model of tests/wan_ref.py derive (2 layers, 2 heads of 64), 384 tokens, 3 UniPC
# steps (warm-up 1), 2 seeds for fidelity and one larger grid for speed; dense, mc-sparse, est-block
# and two peers at matched budgets (sta's tiles and spargeattn's self-similarity floor cannot reach
# 0.3 on this grid). Checks comparison.{csv,md,tex}: one row per method x density, the intervals
# around the means, the density past the warm-up derived from closed_loop.csv, the speedups taken from
# the speed run, "cannot reach ρ" and run.json's unreached_densities exactly for the peers off target,
# the Pareto figure's data (unreached peers and dense left out, the frontier non-dominated); and bad
# input to dsgap compare (one line, nothing written).
# Run: ctest -R cli_comparison (needs $DSGAP, $DSGAP_SOURCE and the wan_models fixture).
. "$(dirname "$0")/../lib.sh" comparison
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
MODELS=${WAN_MODELS:-$PWD/wan_models}
FIX=$DSGAP_SOURCE/tests/fixtures/wan
[ -d "$MODELS/orig_hd64" ] || { echo "no test models in $MODELS (run: ctest -R wan_models)"; exit 1; }
all() { local c; for c in "$@"; do eval "$c" || return 1; done; } # every shell condition holds
ini() { # NAME LATENT SEEDS
  printf '[experiment]\nname = %s\n[model]\npath = %s/orig_hd64\nlabel = tiny\nlatent = %s\nsteps = 3\nshift = 3\nguidance = 2\nseeds = %s\n[prompts]\nfix = %s/text.safetensors\n[policies]\nlist = dense, mc-sparse, est-block, sta/budget=matched, spargeattn/budget=matched\n[densities]\nlist = 0.3\n[schedules]\nw1 = warmup=1\n[device]\ndevice = cpu\n' \
    "$1" "$MODELS" "$2" "$3" "$FIX"
}
ini cmp_fid 4x16x24 "3, 4" > "$tmp/fid.ini"
ini cmp_speed 4x16x32 3 > "$tmp/speed.ini"
out=$tmp/res
DSGAP_WORK=$tmp/work EXP_INI=$tmp/fid.ini COMPARISON_SPEED_INI=$tmp/speed.ini \
  bash "$DSGAP_SOURCE/experiments/comparison.sh" --out "$out" --quiet > "$tmp/log" 2>&1
check "comparison.sh: exit 0" [ $? -eq 0 ] || cat "$tmp/log"
csv=$out/comparison.csv fcl=$out/fidelity/tiny.w1/closed_loop.csv scl=$out/speed/tiny.w1/closed_loop.csv
check "the tables, run.json, README, the per-sample runs" [ -s "$csv" -a -s "$out/comparison.md" -a -s "$out/comparison.tex" \
  -a -s "$out/run.json" -a -s "$out/README.md" -a -s "$fcl" -a -s "$scl" ]
check "comparison.csv: header and one row per method x density" [ "$(head -1 "$csv" | cut -d, -f1-8)" = \
  "policy,source,density_target,samples,density,sparse_density,reached,psnr" -a "$(wc -l < "$csv")" -eq 6 ]
check "every row over the 2 samples" [ "$(awk -F, 'NR > 1 && $4 == 2' "$csv" | wc -l)" -eq 5 ]
# the density past the warm-up: (mean density - 1/3) / (2/3), from the per-sample rows
check "sparse_density = (density - W/S) / (1 - W/S) from closed_loop.csv" [ "$(awk -F, 'NR == FNR { if (FNR > 1) { s[$3] += $5; n[$3]++ }; next }
  FNR > 1 { d = (s[$1] / n[$1] - 1 / 3) / (2 / 3); if (d - $6 > 1e-4 || $6 - d > 1e-4) bad++ } END { print bad + 0 }' "$fcl" "$csv")" -eq 0 ]
check "mc-sparse: PSNR mean inside its interval, rel_l2 > 0, SSIM < 1" \
  [ "$(awk -F, '$1 == "mc-sparse" && $9 <= $8 && $8 <= $10 && $14 > 0 && $11 < 1 && $15 <= $14 && $14 <= $16' "$csv" | wc -l)" -eq 1 ]
check "the PSNR mean is the samples' mean" [ "$(awk -F, 'NR == FNR { if ($3 == "mc-sparse") { s += $6; n++ }; next }
  $1 == "mc-sparse" { d = s / n - $8; print (d < 1e-3 && d > -1e-3) }' "$fcl" "$csv")" = 1 ]
check "speedups are the speed run's (dense time / the method's)" [ "$(awk -F, 'NR == FNR { if (FNR > 1) t[$3] = $10; next }
  FNR > 1 { d = t["dense"] / t[$1] - $17; if (d > 1e-3 * $17 || -d > 1e-3 * $17) bad++ } END { print bad + 0 }' "$scl" "$csv")" -eq 0 ]
check "the peers off target: reached 0 exactly where |sparse_density - 0.3| > 0.02" \
  [ "$(awk -F, 'NR > 1 { peer = $1 ~ /^(sta|spargeattn)/; off = ($6 - 0.3 > 0.02 || 0.3 - $6 > 0.02); if ($7 != !(peer && off)) bad++ } END { print bad + 0 }' "$csv")" -eq 0 ]
nun=$(awk -F, 'NR > 1 && $7 == 0' "$csv" | wc -l)
check "at least one peer cannot reach 0.3 on this grid (spargeattn's floor)" [ "$nun" -ge 1 ]
check "run.json lists the unreached densities, comparison.md says 'cannot reach ρ' for each" \
  [ "$(grep -c '"density_target":' "$out/run.json")" -eq "$nun" -a "$(grep -c 'cannot reach ρ |' "$out/comparison.md")" -eq "$nun" ]
tex_ok() { [ "$(grep -c '^\\texttt{' "$out/comparison.tex")" -eq 5 ] && grep -q toprule "$out/comparison.tex"; }
check "comparison.tex: booktabs table, one line per method x density" tex_ok
dat=$out/figures/pareto.dat
check "pareto.dat: one block per plotted method (dense and unreached peers left out)" \
  all '[ "$(grep -c "^# method" "$dat")" -eq $((5 - 1 - nun)) ]' '! grep -q "^# method \(dense\|spargeattn\)" "$dat"'
# the frontier: no plotted point is both faster and better than a frontier point
check "the frontier's points are not dominated" [ "$(awk '/^# method/ { m = 1 } /^# frontier/ { m = 0; f = 1; next }
  /^[0-9]/ { if (m) { x[++n] = $1; y[n] = $2 } else if (f) { fx[++k] = $1; fy[k] = $2 } }
  END { for (i = 1; i <= k; i++) for (j = 1; j <= n; j++) if (x[j] >= fx[i] && y[j] >= fy[i] && (x[j] > fx[i] || y[j] > fy[i])) bad++; print (k > 0) * 1 + bad * 10 }' "$dat")" -eq 1 ]
if command -v gnuplot > /dev/null; then
  check "figures/pareto.png and .pdf rendered" [ -s "$out/figures/pareto.png" -a -s "$out/figures/pareto.pdf" ]
fi

# --- the device stages: gpu (here on the CPU: its cells are done already) packs, analyse unpacks -----
DSGAP_WORK=$tmp/work EXP_INI=$tmp/fid.ini COMPARISON_SPEED_INI=$tmp/speed.ini COMPARISON_DEVICE=cpu \
  bash "$DSGAP_SOURCE/experiments/comparison.sh" --stage gpu --pack "$tmp/pack.tgz" --out "$tmp/gpu" --quiet > "$tmp/gpu.log" 2>&1
check "--stage gpu: exit 0, both runs packed" all '[ -s "$tmp/pack.tgz" ]' \
  '[ "$(tar tzf "$tmp/pack.tgz" | grep -c closed_loop.csv)" -eq 2 ]' || cat "$tmp/gpu.log"
DSGAP_WORK=$tmp/work bash "$DSGAP_SOURCE/experiments/comparison.sh" --stage analyse --from "$tmp/pack.tgz" --out "$tmp/an" > "$tmp/an.log" 2>&1
check "--stage analyse --from the pack: the same comparison.csv, the cells left alone" \
  all 'cmp -s "$csv" "$tmp/an/comparison.csv"' '[ -d "$tmp/work/comparison/fidelity/cells" ]' || cat "$tmp/an.log"

# --- README's "Who wins where" lines from these results (experiments/who_wins.sh) -------------------------
printf '# r\nbefore\n<!-- who-wins:begin -->\nold\n<!-- who-wins:end -->\nafter\n' > "$tmp/README.md"
bash "$DSGAP_SOURCE/experiments/who_wins.sh" --comparison "$out" --length "$tmp/none" --readme "$tmp/README.md" 2> "$tmp/ww.err"
mcp=$(awk -F, '$1 == "mc-sparse" { printf "%.1f", $8 }' "$csv")
check "who_wins.sh: the section replaced (lines around kept), mc-sparse's PSNR at 0.3, the peers that cannot reach it, the length part pending" \
  all 'grep -qx before "$tmp/README.md"' 'grep -qx after "$tmp/README.md"' '! grep -qx old "$tmp/README.md"' \
  'grep -q "^- \*\*ρ 0.3\*\*: best PSNR" "$tmp/README.md"' 'grep -q "mc-sparse: $mcp dB" "$tmp/README.md"' \
  'grep -q "Cannot reach ρ 0.3: .*spargeattn" "$tmp/README.md"' 'grep -q "Where sparse stops paying: \*pending\*" "$tmp/README.md"'

# --- the density figure and the ‡ marks (every state) -------------------------------------------------------
fdd=$out/figures/fidelity_density.dat
check "fidelity_density.dat: one block per method with a finite PSNR, dense and infinite PSNRs left out, a frontier" \
  all '[ "$(grep -c "^# method" "$fdd")" -eq "$(awk -F, '\''NR > 1 && $1 != "dense" && $8 != "inf" && $8 != "nan" { m[$1] = 1 } END { print length(m) }'\'' "$csv")" ]' \
  '! grep -q "^# method dense" "$fdd"' 'grep -q "^# frontier" "$fdd"' '[ -s "$out/figures/fidelity_density.gp" ]'
if command -v gnuplot > /dev/null; then
  check "figures/fidelity_density.png and .pdf rendered" [ -s "$out/figures/fidelity_density.png" -a -s "$out/figures/fidelity_density.pdf" ]
fi
check "fidelity_density: a row off its target drawn hollow with ‡, its target named under the axis, no text on the data" \
  all 'grep -q "hollow with ‡: more than 0.02 from its target ρ:\\\\nρ 0" "$out/figures/fidelity_density.gp"' \
  'grep -q "(\$6 > 0 ? \$2 : NaN):3:4 with yerrorbars" "$out/figures/fidelity_density.gp"' '! grep -q "stringcolumn(5)" "$out/figures/fidelity_density.gp"'
noff=$(awk -F, 'NR > 1 && $1 != "dense" && $7 == 1 { d = $6 - $3; if (d > 0.02 || -d > 0.02) n++ } END { print n + 0 }' "$csv")
check "‡ exactly on the rows not flagged but off target ($noff: the 128-key top-k rounding at 384 tokens), in .md and .tex" \
  all '[ "$noff" -ge 1 ]' '[ "$(grep -c " ‡ |" "$out/comparison.md")" -eq "$noff" ]' '[ "$(grep -c "ddagger}\\$ &" "$out/comparison.tex")" -eq "$noff" ]' \
  'grep -q "^\*\*Rows off their target ρ" "$out/comparison.md"'
check "run.json: speed_status measured" grep -q '"speed_status":[[:space:]]*"measured"' "$out/run.json"

# --- an unfinished speed run (the pack without its closed_loop.csv): not measured, no Pareto figure -------
mkdir -p "$tmp/pk2"
tar xzf "$tmp/pack.tgz" -C "$tmp/pk2"
rm -rf "$tmp"/pk2/speed/*/ "$tmp/pk2/speed/summary.csv" "$tmp/pk2/speed/summary.md"
(cd "$tmp/pk2" && tar czf "$tmp/pack2.tgz" fidelity speed)
mkdir -p "$tmp/lg"
printf 'device_all.sh 2026-12-04T04:56:58Z commit abcdef123456; steps: comparison\n' > "$tmp/lg/summary.txt"
printf 'comparison: [0s] speed: dsgap run x.ini (2 cells)\nrun: [1/2] tiny.w1/fix.s3.dense 1.5s  elapsed 2s  ETA 2s\r\rgenerate mc-sparse@0.3: step 1/3 [..] 10%%  0.1s elapsed  ETA 1s\rgenerate mc-sparse@0.3: step 2/3 [..] 50%%  9.5s elapsed  ETA 9s\ncomparison: [9s] speed: dsgap run stopped (status 124): run again to go on\n' > "$tmp/lg/comparison.log"
(cd "$tmp/lg" && tar czf "$tmp/logs.tgz" summary.txt comparison.log)
DSGAP_WORK=$tmp/work2 COMPARISON_SPEED_INI=$tmp/speed.ini bash "$DSGAP_SOURCE/experiments/comparison.sh" --stage analyse \
  --from "$tmp/pack2.tgz" --logs "$tmp/logs.tgz" --out "$tmp/nm" > "$tmp/nm.log" 2>&1
check "--stage analyse of an unfinished speed run: exit 0" [ $? -eq 0 ] || cat "$tmp/nm.log"
nm=$tmp/nm
check "not measured: comparison.csv's speedups nan, every .md row 'not measured', .tex '---', run.json's speed_status" \
  all '[ "$(awk -F, '\''NR > 1 && !($17 == "nan" && $19 == 0)'\'' "$nm/comparison.csv" | wc -l)" -eq 0 ]' \
  '[ "$(grep -c "| not measured |$" "$nm/comparison.md")" -eq 5 ]' 'grep -q "^\*\*Speed: not measured\.\*\*" "$nm/comparison.md"' \
  '[ "$(grep -c -- "--- \\\\\\\\$" "$nm/comparison.tex")" -eq 5 ]' 'grep -q "speedup was not measured" "$nm/comparison.tex"' \
  'grep -q "\"speed_status\":[[:space:]]*\"not_measured\"" "$nm/run.json"'
check "not measured: the fidelity the same as with the speed run, no Pareto figure, the density figure kept" \
  all '[ "$(cut -d, -f1-16 "$nm/comparison.csv")" = "$(cut -d, -f1-16 "$csv")" ]' '[ ! -e "$nm/figures/pareto.dat" -a ! -e "$nm/figures/pareto.png" ]' \
  '[ -s "$nm/figures/fidelity_density.dat" ]'
check "--logs: logs/STAMP/ (progress bars cut to their last state), the binaries and the speed log's cells in README" \
  all '[ -s "$nm/logs/2026-12-04T0456Z/summary.txt" ]' '[ "$(grep -c "^generate " "$nm/logs/2026-12-04T0456Z/comparison.log")" -eq 1 ]' \
  'grep -q "binaries of abcdef1" "$nm/README.md"' 'grep -q "finished \`dense\` 1.5s" "$nm/README.md"' \
  'grep -q "stopped (status 124: the budget ran out) in \`mc-sparse@0.3\` at step 2/3 after 9.5s" "$nm/README.md"' \
  'grep -q "^Tables made .* from pack2.tgz" "$nm/README.md"'
printf '<!-- who-wins:begin -->\n<!-- who-wins:end -->\n' > "$tmp/R2.md"
bash "$DSGAP_SOURCE/experiments/who_wins.sh" --comparison "$nm" --length "$tmp/none" --readme "$tmp/R2.md" 2> /dev/null
check "who_wins.sh without speed: no method called fastest, the methods by PSNR, mc-sparse's PSNR" \
  all '! grep -q fastest "$tmp/R2.md"' 'grep -q "By PSNR (dB):" "$tmp/R2.md"' 'grep -q "mc-sparse: $mcp dB" "$tmp/R2.md"'

# --- bad input: one line, nothing written -------------------------------------------------------------
mkdir -p "$tmp/old"
cp "${fcl%/*}/run.json" "$tmp/old/"
cut -d, -f1-12 "$fcl" > "$tmp/old/closed_loop.csv" # a closed_loop.csv from before rel_l2
"$DSGAP" compare "$tmp/old" --out "$tmp/bad1" 2> "$tmp/bad1.err"
rc=$?
check "compare: a closed_loop.csv without rel_l2 is refused in one line, nothing written" \
  all '[ $rc -eq 1 -a "$(wc -l < "$tmp/bad1.err")" -eq 1 -a ! -e "$tmp/bad1" ]' 'grep -q "no column rel_l2" "$tmp/bad1.err"'
"$DSGAP" compare "$tmp/nothing" --out "$tmp/bad2" 2> "$tmp/bad2.err"
rc=$?
check "compare: a missing run folder is refused, nothing written" all '[ $rc -eq 1 -a ! -e "$tmp/bad2" ]' 'grep -q "cannot read" "$tmp/bad2.err"'
"$DSGAP" compare "${fcl%/*}" --speed "${scl%/*}" --out "$tmp/bad3" --tol 2 2> "$tmp/bad3.err"
check "compare: a bad --tol is a usage error" [ $? -eq 2 -a ! -e "$tmp/bad3" ]
mkdir -p "$tmp/nan"
cp "${fcl%/*}/run.json" "$tmp/nan/"
sed '$s/^\([^,]*,[^,]*,[^,]*,\)[^,]*/\1nan/' "$fcl" > "$tmp/nan/closed_loop.csv" # the last row's density_target: nan (a segfault once)
"$DSGAP" compare "$tmp/nan" --out "$tmp/bad4" 2> "$tmp/bad4.err"
rc=$?
check "compare: a nan density_target is refused in one line naming the file, nothing written" \
  all '[ $rc -eq 1 -a "$(wc -l < "$tmp/bad4.err")" -eq 1 -a ! -e "$tmp/bad4" ]' 'grep -q "nan/closed_loop.csv:.*out of range" "$tmp/bad4.err"'
# a policy name from the file goes into pareto.gp quoted, never as code (it ran a shell command once)
mkdir -p "$tmp/inj" "$tmp/ctl" "$tmp/dense"
cp "${fcl%/*}/run.json" "$tmp/inj/"; cp "${fcl%/*}/run.json" "$tmp/ctl/"; cp "${fcl%/*}/run.json" "$tmp/dense/"
sed "s/,mc-sparse,/,mc'.system('touch $(printf '%s' "$tmp" | sed 's/[\/&]/\\&/g')\/PWNED').',/" "$fcl" > "$tmp/inj/closed_loop.csv"
"$DSGAP" compare "$tmp/inj" --speed "${scl%/*}" --out "$tmp/inj_out" --boot 20 > /dev/null 2> "$tmp/inj.err"
rc=$?
check "compare: a policy name with quotes and system() is drawn as text (exit 0, no command run)" \
  all '[ $rc -eq 0 ]' '[ ! -e "$tmp/PWNED" ]' 'grep -q "system" "$tmp/inj/closed_loop.csv"' '[ -s "$tmp/inj_out/figures/pareto.png" ]'
# gnuplot failing (here: killed writing the PNG past `ulimit -f`; dsgap ignores SIGXFSZ and gnuplot
# inherited that: it wrote a cut PNG and exited 0) publishes nothing: the figure is rendered in a
# scratch folder before anything is renamed into place
png=$(stat -c %s "$tmp/inj_out/figures/pareto.png")
big=$(stat -c %s "$tmp/inj_out"/comparison.* "$tmp/inj_out"/run.json "$tmp/inj_out"/figures/*.pdf \
  "$tmp/inj_out"/figures/*.dat "$tmp/inj_out"/figures/*.gp | sort -n | tail -1)
lim=$(( (big + png) / 2 / 1024 ))
(ulimit -f "$lim"; "$DSGAP" compare "$tmp/inj" --speed "${scl%/*}" --out "$tmp/fsz" --boot 20) > /dev/null 2> "$tmp/fsz.err"
rc=$?
check "compare: gnuplot stopped by a file size limit ($lim KiB, PNG $png B) publishes nothing: exit 1, one line" \
  all '[ $rc -eq 1 ]' '[ $big -lt $((lim * 1024)) ]' '[ "$(wc -l < "$tmp/fsz.err")" -eq 1 ]' 'grep -q "gnuplot" "$tmp/fsz.err"' \
  'grep -q "(SIGXFSZ, file size limit exceeded)" "$tmp/fsz.err"' \
  '[ -z "$(find "$tmp/fsz" -type f 2>/dev/null)" ]'
sed "s/,mc-sparse,/,mc-$(printf '\033')sparse,/" "$fcl" > "$tmp/ctl/closed_loop.csv"
"$DSGAP" compare "$tmp/ctl" --out "$tmp/ctl_out" 2> "$tmp/ctl.err"
rc=$?
check "compare: a policy name with a control character is refused in one line, nothing written" \
  all '[ $rc -eq 1 -a "$(wc -l < "$tmp/ctl.err")" -eq 1 -a ! -e "$tmp/ctl_out" ]' 'grep -q "ctl/closed_loop.csv:.*control character" "$tmp/ctl.err"'
grep -E '^prompt|,dense,' "$fcl" > "$tmp/dense/closed_loop.csv"
"$DSGAP" compare "$tmp/dense" --out "$tmp/dense_out" > /dev/null 2> "$tmp/dense.err"
rc=$?
check "compare: dense rows only: the tables, no figure, a warning (gnuplot failed on an empty x range once)" \
  all '[ $rc -eq 0 ]' '[ -s "$tmp/dense_out/comparison.md" ]' 'grep -q "not drawn" "$tmp/dense.err"'
mkdir -p "$tmp/fifo"; cp "$fcl" "$tmp/fifo/"; mkfifo "$tmp/fifo/run.json"
timeout 60 "$DSGAP" compare "$tmp/fifo" --out "$tmp/fifo_out" 2> "$tmp/fifo.err"
rc=$?
check "compare: a run.json that is a FIFO is refused at once (it waited for a writer forever), nothing written" \
  all '[ $rc -eq 1 -a ! -e "$tmp/fifo_out" ]' 'grep -q "fifo/run.json: not a regular file" "$tmp/fifo.err"'
# values a run could not have written: refused with the file (each was accepted and changed the table)
n=0
for case in 'warmup|s/"warmup":[[:space:]]*[0-9]*/"warmup": -1/|0 <= warmup < steps' 'steps|s/"steps":[[:space:]]*\([0-9]*\)/"steps": \1.9/|expected integers' \
	'psnr|-inf|out of range' 'dup|row 2 twice|again'; do
	IFS='|' read -r what expr want <<<"$case"
	vd="$tmp/v$((n++))"; mkdir -p "$vd"; cp "${fcl%/*}/run.json" "$fcl" "$vd/"
	case $what in
	warmup | steps) sed -i "$expr" "$vd/run.json" ;;
	dup) sed -n 2p "$fcl" >> "$vd/closed_loop.csv" ;;
	psnr) awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) h[i] = $i } NR == 2 { for (i = 1; i <= NF; i++) if (h[i] == "psnr") $i = "-inf" } 1' \
		"$fcl" > "$vd/closed_loop.csv" ;;
	esac
	"$DSGAP" compare "$vd" --out "$vd.out" 2> "$vd.err"
	rc=$?
	check "compare: $what ($expr) refused in one line naming the file ($want), nothing written" \
	  all '[ $rc -eq 1 -a "$(wc -l < "$vd.err")" -eq 1 -a ! -e "$vd.out" ]' 'grep -q "$vd/.*$want" "$vd.err"'
done
sha=$(sha256sum < "${fcl%/*}/run.json")
"$DSGAP" compare "${fcl%/*}" --out "${fcl%/*}" 2> "$tmp/bad5.err"
rc=$?
check "compare: --out an input run's folder is refused, its run.json untouched" \
  all '[ $rc -eq 2 ]' '[ "$(sha256sum < "${fcl%/*}/run.json")" = "$sha" ]' 'grep -q "is the input" "$tmp/bad5.err"'

finish
