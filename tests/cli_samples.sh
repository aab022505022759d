#!/usr/bin/env bash
# cli_samples.sh: dsgap decompose over a sample set (issue 19): three synthetic "samples" (seeds),
# LABEL=DIR operands and a --samples list give the same tables; counts, per-sample rows and sign
# stability are consistent; one sample reproduces the single-folder tables; bad lists are refused.
. "$(dirname "$0")/lib.sh" samples
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
"$DSGAP" decompose a="$tmp/s1" b="$tmp/nope" --out "$tmp/bad2" >/dev/null 2>"$tmp/err"
check "a missing sample folder: exit 1, no tables" bash -c "test $? -eq 1 && test ! -e '$tmp/bad2/decomposition.csv'"
"$DSGAP" decompose "$tmp/s1" "$tmp/s2" >/dev/null 2>"$tmp/err"
check "several folders without --out: refused" test $? -eq 2
finish
