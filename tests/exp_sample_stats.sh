#!/usr/bin/env bash
# exp_sample_stats.sh: the refresh and attention experiments over a sample set (issue 19), on tiny
# synthetic samples (256 tokens). experiments/refresh.sh --samples (a reduced set of an experiment
# file of refresh.ini's form) runs dsgap refreshstats: its pooled E, each sample's E and the sign
# counts are recomputed here from the samples' metrics.csv; the README says the set is reduced and
# git status is unchanged. dsgap attnstats over two samples per source: per-sample H and mass and
# the sign counts of ΔH, Δmass recomputed from attnstats.csv; intervals hold their estimate. Bad
# input (unpaired samples, a missing run) is one line and no output. Exit 77 without gnuplot or git.
. "$(dirname "$0")/lib.sh" expstats
SRC=${DSGAP_SOURCE:?DSGAP_SOURCE: the source tree}
command -v gnuplot >/dev/null || { echo "skipped: no gnuplot"; exit 77; }
git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "skipped: $SRC is not a git checkout"; exit 77; }
state() { git -C "$SRC" status --porcelain --untracked-files=all; git -C "$SRC" status --porcelain --ignored -- results; }
synth() { echo "synth: grid=2x8x16 heads=2 layers=2 steps=6 head_dim=32 seed=$1"; }
{
  printf '[experiment]\nname = refresh\n[traces]\nsynthetic = %s\n' "$(synth 3)"
  printf 'a-s1 = %s\nb-s1 = %s\nc-s2 = %s\n' "$(synth 4)" "$(synth 5)" "$(synth 6)"
  printf '[policies]\nlist = dense, baseline, mc-residual\n[densities]\nlist = 0.25\n'
  printf '[schedules]\na1 = warmup=2,anchors=1\na2 = warmup=2,anchors=1;3\n[device]\ndevice = cpu\n'
} > "$tmp/refresh.ini"
state > "$tmp/before"
EXP_INI=$tmp/refresh.ini DSGAP_WORK=$tmp/work bash "$SRC/experiments/refresh.sh" --out "$tmp/out" \
  --samples a-s1,c-s2 > "$tmp/refresh.log" 2>&1
check "refresh.sh --samples a-s1,c-s2 exits 0" bash -c "[ $? -eq 0 ] || { tail -5 '$tmp/refresh.log'; false; }"
state > "$tmp/after"
check "git status unchanged by the run" bash -c "cmp -s '$tmp/before' '$tmp/after' || { diff '$tmp/before' '$tmp/after' | head -5; false; }"
o=$tmp/out
check "tables, figures (png) and README; the synthetic trace's in synthetic/" test -s "$o/refresh.md" -a -s "$o/anchors.tex" \
  -a -s "$o/trends.tex" -a -s "$o/samples.csv" -a -s "$o/figures/error_vs_staleness-rho0.25.png" \
  -a -s "$o/figures/error_vs_anchors-rho0.25.png" -a -s "$o/synthetic/trends.csv" -a ! -e "$o/synthetic/samples.csv"
check "README: a reduced set of 2 samples, with the command, and the trends table" \
  grep -q 'reduced set of 2 of the ini.s 24 samples (`experiments/refresh.sh --update-results --samples a-s1,c-s2`)' "$o/README.md"
check "README names the figures with their density" grep -q 'figures/error_vs_anchors-rho0.25.png' "$o/README.md"
check "README carries the sign stability" grep -q '| mc-residual | .* of 2 |' "$o/README.md"
# E per sample and pooled, from the metrics (post-warm-up: step >= 2), against the tables
awk -F, 'FNR == 1 { split(FILENAME, p, "/"); run = p[length(p) - 1]; next }
  $1 == "mc-residual" && $4 >= 2 { s[run] += $8; n[run]++; split(run, q, "."); S[q[2]] += $8; N[q[2]]++ }
  END { for (r in s) printf "%s %.6g\n", r, s[r] / n[r]; for (k in S) printf "pooled.%s %.6g\n", k, S[k] / N[k] }' \
  "$tmp"/work/refresh-*/{a-s1,c-s2}.a{1,2}/metrics.csv | sort > "$tmp/want"
{
  awk -F, '$2 == "mc-residual" && $3 ~ /^E\(a[12]\)$/ { k = $3; gsub(/[E()]/, "", k); printf "%s.%s %.6g\n", $1, k, $4 }' "$o/samples.csv"
  awk -F, '$3 == "mc-residual" { printf "pooled.%s %.6g\n", $1, $4 }' "$o/anchors.csv"
} | sort > "$tmp/got"
check "E of mc-residual per sample and pooled = the mean rel_l2 of the metrics ($(wc -l < "$tmp/want") values)" \
  bash -c "[ \$(wc -l < '$tmp/want') -eq 6 ] && cmp -s '$tmp/want' '$tmp/got' || { diff '$tmp/want' '$tmp/got'; false; }"
check "trends: each count = the samples with a positive own estimate; lo <= estimate <= hi" awk -F, '
  FNR == 1 { f++; next }
  f == 1 && $3 ~ /^(slope|E\(a1\)-E\(a2\))/ { k = $2 " " $3; n[k]++; pos[k] += $4 > 0 }
  f == 2 { k = $1 " " $2; if (!(k in n) || n[k] != $8 || pos[k] != $7 || $6 != 2 || !($4 <= $3 && $3 <= $5)) bad = 1; m++ }
  END { exit bad || m != 4 }' "$o/samples.csv" "$o/trends.csv"
bash "$SRC/experiments/ladder.sh" --out "$tmp/l" --samples a-s1 >/dev/null 2>"$tmp/err"
check "ladder.sh --samples: refused (exit 2, one line), no output" bash -c "[ $? -eq 2 ] && [ \$(wc -l < '$tmp/err') -eq 1 ] && [ ! -e '$tmp/l' ]"
a1=$(echo "$tmp"/work/refresh-*/a-s1.a1)
refused "refreshstats: a sample without one of its runs" "a-s1.a9/run.json" "$tmp/x" \
  "$DSGAP" refreshstats --schedules a1,a9 --out "$tmp/x" "${a1%.a1}"

# attnstats over two samples per source, paired by file name
mkdir -p "$tmp/L" "$tmp/R"
for s in 1 2; do
  "$DSGAP" synth --out "$tmp/L/x$s.h5" --grid 2x8x16 --heads 2 --layers 2 --steps 3 --head-dim 32 --seed $s >/dev/null
  "$DSGAP" synth --out "$tmp/R/x$s.h5" --grid 2x8x16 --heads 2 --layers 2 --steps 3 --head-dim 32 --seed $((s + 7)) >/dev/null
done
"$DSGAP" attnstats --density 0.25 --boot 200 --out "$tmp/as" --quiet learned="$tmp/L/x1.h5,$tmp/L/x2.h5" \
  random="$tmp/R/x1.h5,$tmp/R/x2.h5" > /dev/null 2>"$tmp/err"
check "attnstats over 2 samples: exit 0, csv md samples csv png" test $? -eq 0 -a -s "$tmp/as/attnstats.md" \
  -a -s "$tmp/as/attnstats-samples.csv" -a -s "$tmp/as/attnstats-rho0.25.png"
check "attnstats: each sample's H and mass (all layers) = the mean of its units in attnstats.csv" bash -c "
  awk -F, 'NR > 1 { h[\$2 \",H(\" \$1 \")\"] += \$8; m[\$2 \",mass(\" \$1 \")\"] += \$9; n[\$2 \",\" \$1]++ }
    END { for (k in h) printf \"%s %.4f\n\", k, h[k] / 3 / 4
          for (k in m) printf \"%s %.4f\n\", k, m[k] / 3 / 4 }' '$tmp/as/attnstats.csv' | sort > '$tmp/aw'
  awk -F, '\$2 == \"all\" && \$3 !~ /^d/ { printf \"%s,%s %.4f\n\", \$1, \$3, \$4 }' '$tmp/as/attnstats-samples.csv' | sort > '$tmp/ag'
  [ \$(wc -l < '$tmp/aw') -eq 8 ] && cmp -s '$tmp/aw' '$tmp/ag' || { diff '$tmp/aw' '$tmp/ag'; false; }"
check "attnstats: the ΔH and Δmass counts (all layers) = the samples with a positive own estimate" bash -c "
  want=\$(awk -F, '\$2 == \"all\" && \$3 == \"dH(random)-first\" { h += \$4 > 0 } \$2 == \"all\" && \$3 == \"dmass(random)-first\" { m += \$4 > 0 }
    END { printf \"%d of 2 | %d of 2\", h, m }' '$tmp/as/attnstats-samples.csv')
  grep -q \"^| all layers | random | .* | \${want%% |*} | .* | \${want##*| } |\$\" '$tmp/as/attnstats.md'"
check "attnstats: every interval holds its estimate" awk '
  { while (match($0, /[-0-9.]+ \[[-0-9.]+, [-0-9.]+\]/)) { s = substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH)
      gsub(/[][,]/, "", s); split(s, v, " "); n++; if (!(v[2] <= v[1] && v[1] <= v[3])) bad = 1 } }
  END { exit bad || n < 20 }' "$tmp/as/attnstats.md"
refused "attnstats: sources with other samples" "same samples in the same order" "$tmp/y" \
  "$DSGAP" attnstats --out "$tmp/y" a="$tmp/L/x1.h5,$tmp/L/x2.h5" b="$tmp/R/x2.h5,$tmp/R/x1.h5"
finish
