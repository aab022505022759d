#!/usr/bin/env bash
# cli_samples.sh: dsgap decompose over a sample set (issue 19): three synthetic "samples" (seeds),
# LABEL=DIR operands and a --samples list give the same tables; counts, per-sample rows and sign
# stability are consistent; one sample reproduces the single-folder tables; bad lists are refused.
. "$(dirname "$0")/../lib.sh" samples
set -o pipefail
for s in 1 2 3; do
  "$DSGAP" synth --out "$tmp/t$s.h5" --grid 2x8x16 --heads 2 --layers 2 --steps 5 --head-dim 32 --seed $s >/dev/null &&
  "$DSGAP" replay "$tmp/t$s.h5" --policies ladder,factorial,pisa --density 0.5 --schedule warmup=2 --out "$tmp/s$s" --quiet
done
"$DSGAP" decompose a="$tmp/s1" b="$tmp/s2" c="$tmp/s3" --out "$tmp/m1" --boot 200 >"$tmp/out1" 2>&1
check "decompose LABEL=DIR... --out exits 0" test $? -eq 0
printf '# three samples\na=s1\nb=s2\n\nc=s3\n' > "$tmp/list.txt"
"$DSGAP" decompose --samples "$tmp/list.txt" --out "$tmp/m2" --boot 200 >/dev/null 2>&1
check "--samples LIST gives the same tables" bash -c "cmp -s '$tmp/m1/decomposition.csv' '$tmp/m2/decomposition.csv' && cmp -s '$tmp/m1/ablation.csv' '$tmp/m2/ablation.csv'"
for f in decomposition ablation; do
  check "$f: csv, md, tex, -samples.csv written" test -s "$tmp/m1/$f.csv" -a -s "$tmp/m1/$f.md" -a -s "$tmp/m1/$f.tex" -a -s "$tmp/m1/$f-samples.csv"
  check "$f.csv: all-layers rows count 3 samples, 12 clusters, 36 units per policy" awk -F, '$2 == "all" && $3 !~ /^peer/ {
    if ($9 != 3 || $8 != 12 || $7 != 36) exit 1; n++ } END { exit !(n > 0) }' "$tmp/m1/$f.csv"
  check "$f.csv: layer rows count 3 samples, 6 clusters" awk -F, 'NR > 1 && $2 != "all" { if ($9 != 3 || $8 != 6) exit 1; n++ } END { exit !(n > 0) }' "$tmp/m1/$f.csv"
  check "$f.csv: n_positive in 0..3, lo <= hi" awk -F, 'NR > 1 && $3 !~ /^peer:density/ {
    if (($11 != "" && ($11 < 0 || $11 > 3)) || $5 + 0 > $6 + 0) exit 1 }' "$tmp/m1/$f.csv"
  check "$f-samples.csv: three samples a, b, c" bash -c "test \"\$(cut -d, -f1 '$tmp/m1/$f-samples.csv' | sed 1d | sort -u | tr '\n' ' ')\" = 'a b c '"
  check "$f.md: two-level bootstrap, per-sample table, sign stability" bash -c "grep -q 'two-level bootstrap over 3 samples' '$tmp/m1/$f.md' &&
    grep -q '^Per sample' '$tmp/m1/$f.md' && grep -q ' of 3 |' '$tmp/m1/$f.md'"
done
# the per-sample table of the .md is in the .tex too (issue 49): a row per sample whose first number
# is the sample's own E(est-block) of decomposition-samples.csv to 3 significant figures
check "decomposition.tex: the per-sample table, each sample's E(est-block)" awk -F, '
  FNR == 1 { f++ }
  f == 1 && $2 == 0.5 && $3 == "all" && $4 == "E(est-block)" { want[$1] = sprintf("$%.3g$", $5); n++; next }
  f == 2 && /label\{tab:decomposition-samples-0.5\}/ { in_t = 1 }
  f == 2 && in_t && /^[abc] & / { split($0, c, " & "); if (c[2] != want[c[1]]) bad++; got++ }
  f == 2 && in_t && /end\{table\*\}/ { in_t = 0 }
  END { exit bad || n != 3 || got != 3 }' "$tmp/m1/decomposition-samples.csv" "$tmp/m1/decomposition.tex"
# the pooled estimate is the mean of the per-sample ones (same units per sample)
check "E(est-block) pooled = mean of the samples' own" awk -F, '
  FNR == 1 { file++; next }
  file == 1 && $2 == "all" && $3 == "E(est-block)" { pooled = $4 }
  file == 2 && $3 == "layer" { next }
  file == 2 && $3 == "all" && $4 == "E(est-block)" { s += $5; n++ }
  END { d = pooled - s / n; exit !(n == 3 && d < 1e-9 && d > -1e-9) }' "$tmp/m1/decomposition.csv" "$tmp/m1/decomposition-samples.csv"
# one sample through --out: the single-folder estimates and intervals
"$DSGAP" decompose "$tmp/s1" --boot 200 >/dev/null 2>&1
"$DSGAP" decompose only="$tmp/s1" --out "$tmp/one" --boot 200 >/dev/null 2>&1
check "one sample with --out = the single-folder table" cmp -s "$tmp/s1/decomposition.csv" "$tmp/one/decomposition.csv"
# bad input
"$DSGAP" decompose a="$tmp/s1" a="$tmp/s2" --out "$tmp/bad" >/dev/null 2>"$tmp/err"
check "two samples with one label: refused (exit 2)" bash -c "test $? -eq 2 && grep -q \"two samples labelled 'a'\" '$tmp/err'"
# dsgap plot on the sample set (issue 49): figures/samples-rho0.5 whose rows are the tables' numbers
# (row 0 the pooled estimate and interval, then each sample's own), read here from the CSVs
if command -v gnuplot > /dev/null; then
  "$DSGAP" plot "$tmp/m1" > "$tmp/plot.out" 2>&1
  check "plot of a sample set: exit 0, samples-rho0.5 png, pdf, gp, dat" bash -c "test $? -eq 0 && cd '$tmp/m1/figures' &&
    test -s samples-rho0.5.png -a -s samples-rho0.5.pdf -a -s samples-rho0.5.gp -a -s samples-rho0.5.dat -a -s style.gp"
  check "samples-rho0.5.dat: the pooled and per-sample estimates of the CSVs" awk -F, '
    function near(a, b) { return (a - b) * (a - b) <= 1e-18 + 1e-16 * b * b }
    FILENAME ~ /\.dat$/ { if (/^#/) next; split($0, f, " "); lab = f[2]; gsub(/"/, "", lab)
      base = lab == "all" ? 3 : 2 # "all samples" is two words
      for (k = 1; k <= 6; k++) { key = lab SUBSEP q[k]; if (!(key in want) || !near(f[base + k], want[key])) bad++; seen++ }
      if (lab == "all") for (k = 1; k <= 6; k++) if (!near(f[8 + 2 * k], lo[q[k]]) || !near(f[9 + 2 * k], hi[q[k]])) bad++
      next }
    BEGIN { split("selection grouping lost shapley_G shapley_S shapley_R", q, " ") }
    FNR == 1 { next }
    FILENAME ~ /-samples\.csv$/ { if ($2 == 0.5 && $3 == "all") want[$1 SUBSEP $4] = $5; next }
    $1 == 0.5 && $2 == "all" { want["all" SUBSEP $3] = $4; lo[$3] = $5; hi[$3] = $6 }
    END { exit bad || seen != 24 }' "$tmp/m1/decomposition.csv" "$tmp/m1/ablation.csv" \
      "$tmp/m1/decomposition-samples.csv" "$tmp/m1/ablation-samples.csv" "$tmp/m1/figures/samples-rho0.5.dat"
  check "its key renders phi_G (enhanced text), one colour per source (style.gp's ls_SOURCE)" bash -c "
    grep -qF \"'{/:Italic φ}_G grouping'\" '$tmp/m1/figures/samples-rho0.5.gp' && ! grep -q noenhanced.*φ '$tmp/m1/figures/samples-rho0.5.gp' &&
    grep -q 'ls ls_grouping' '$tmp/m1/figures/samples-rho0.5.gp' && grep -q '^ls_grouping = ' '$tmp/m1/figures/style.gp'"
  "$DSGAP" plot "$tmp/m1" --density 0.3 > /dev/null 2> "$tmp/err"
  check "plot of a sample set at a density it lacks: exit 1, one line naming it" bash -c "test $? -eq 1 && grep -q 'no density_target 0.3' '$tmp/err' && test \$(wc -l < '$tmp/err') -eq 1"
fi
"$DSGAP" decompose a="$tmp/s1" b="$tmp/nope" --out "$tmp/bad2" >/dev/null 2>"$tmp/err"
check "a missing sample folder: exit 1, no tables" bash -c "test $? -eq 1 && test ! -e '$tmp/bad2/decomposition.csv'"
"$DSGAP" decompose "$tmp/s1" "$tmp/s2" >/dev/null 2>"$tmp/err"
check "several folders without --out: refused" test $? -eq 2
finish
