#!/usr/bin/env bash
# exp_sample_stats.sh: the refresh and attention experiments over a sample set (issue 19), on tiny
# synthetic samples (256 tokens). experiments/refresh.sh --samples (a reduced set of an experiment
# file of refresh.ini's form) runs dsgap refreshstats: its pooled E, each sample's E and the sign
# counts are recomputed here from the samples' metrics.csv; the README says the set is reduced and
# git status is unchanged. dsgap attnstats over two samples per source: per-sample H and mass and
# the sign counts of ΔH, Δmass recomputed from attnstats.csv; intervals hold their estimate. Bad
# input (unpaired samples, a missing run) is one line and no output. Exit 77 without gnuplot or git.
. "$(dirname "$0")/../lib.sh" expstats
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
# units and clusters of every row, from the metrics: growth = a1's reuse steps (staleness >= 1), the
# difference and E = a run's post-warm-up units; clusters = the samples' (layer, head) with units
awk -F, 'FNR == 1 { split(FILENAME, p, "/"); split(p[length(p) - 1], q, "."); smp = q[1]; sch = q[2]; next }
  $4 >= 2 && $1 != "dense" { u[sch "," $1]++; if ($13 >= 1) g[sch "," $1]++; c[sch "," $1 "," smp "," $5 "," $6] = 1 }
  END { for (k in c) { split(k, f, ","); nc[f[1] "," f[2]]++ }
    for (k in u) { split(k, f, ","); printf "E %s %s %d %d\n", f[1], f[2], u[k], nc[k]
      if (f[1] == "a1") printf "slope %s %d %d\ndiff %s %d %d\n", f[2], g[k], nc[k], f[2], u[k], nc[k] } }' \
  "$tmp"/work/refresh-*/{a-s1,c-s2}.a{1,2}/metrics.csv | sort > "$tmp/want"
{
  awk -F, 'NR > 1 { printf "E %s %s %d %d\n", $1, $3, $7, $8 }' "$o/anchors.csv"
  awk -F, 'NR > 1 { printf "%s %s %d %d\n", ($2 ~ /^slope/ ? "slope" : "diff"), $1, $9, $10 }' "$o/trends.csv"
} | sort > "$tmp/got"
check "units and clusters of anchors.csv and trends.csv = the metrics' ($(wc -l < "$tmp/want") rows)" \
  bash -c "[ \$(wc -l < '$tmp/want') -eq 8 ] && cmp -s '$tmp/want' '$tmp/got' || { diff '$tmp/want' '$tmp/got'; false; }"
check "anchors: 'E below fewer anchors' = the samples whose own E(a2) < E(a1) (samples.csv); none for a1" awk -F, '
  FNR == 1 { f++; next }
  f == 1 && $3 == "E(a1)" { e1[$1 "," $2] = $4 } f == 1 && $3 == "E(a2)" { e2[$1 "," $2] = $4 }
  f == 2 { if ($1 == "a1") bad += $10 != 0 || $11 != 0
    else { lo = n = 0; for (k in e2) { split(k, q, ","); if (q[2] == $3) { n++; lo += e2[k] < e1[k] } }; bad += $10 != lo || $11 != n || n != 2; m++ } }
  END { exit bad || m != 2 }' "$o/samples.csv" "$o/anchors.csv"
check "refresh.md and the .tex: the counts of anchors.csv and trends.csv on their rows" awk -F, '
  function ends(l, t) { return length(l) >= length(t) && substr(l, length(l) - length(t) + 1) == t }
  BEGIN { S = "\001" }
  FNR == 1 { f++; next }
  f == 1 { k = $11 ? $10 " of " $11 : ""
    want[++n] = "md" S "| " $2 " | " $1 " | " $3 " | " S sprintf(" | %d | %d | %d | %s |", $7, $8, $9, k == "" ? "—" : k)
    want[++n] = "anchors.tex" S $2 " & " $1 " & \\texttt{" $3 "} & " S sprintf(" & %d & %d & %d & %s \\\\", $7, $8, $9, k == "" ? "---" : k) }
  f == 2 { e = $2 ~ /^E/
    want[++n] = "md" S "| " $1 " | " (e ? "E(" : "error growth") S sprintf(" | %s of %s | %d%s | %d | %d |", $7, $8, $9, e ? " per schedule" : "", $10, $6)
    want[++n] = "trends.tex" S (e ? " & $E$(" : "\\texttt{" $1 "} & growth") S sprintf(" & %d & %d & %d & %s of %s \\\\", $9, $10, $6, $7, $8) }
  f >= 3 { file = FILENAME; sub(/.*\//, "", file); if (file == "refresh.md") file = "md"
    for (i = 1; i <= n; i++) { split(want[i], w, S); if (w[1] == file && index($0, w[2]) == 1 && ends($0, w[3])) got[i] = 1 } }
  END { for (i = 1; i <= n; i++) if (!(i in got)) { print "not found: " want[i]; bad = 1 }; exit bad || n != 16 }' \
  "$o/anchors.csv" "$o/trends.csv" "$o/refresh.md" "$o/anchors.tex" "$o/trends.tex"
check "the staleness table's units per policy: every policy has the same units at each staleness" awk -F, '
  NR > 1 { k = $1 "," $3; if (k in u && u[k] != $7) bad = 1; u[k] = $7 } END { exit bad || NR < 3 }' "$o/staleness.csv"
bash "$SRC/experiments/ladder.sh" --out "$tmp/l" --samples a-s1 >/dev/null 2>"$tmp/err"
check "ladder.sh --samples: refused (exit 2, one line), no output" bash -c "[ $? -eq 2 ] && [ \$(wc -l < '$tmp/err') -eq 1 ] && [ ! -e '$tmp/l' ]"
a1=$(echo "$tmp"/work/refresh-*/a-s1.a1)
refused "refreshstats: a sample without one of its runs" "a-s1.a9/run.json" "$tmp/x" \
  "$DSGAP" refreshstats --schedules a1,a9 --out "$tmp/x" "${a1%.a1}"
: > "$tmp/none.txt"
refused "refreshstats --samples of an empty file: exit 1 (255 once), one line" "none.txt: no samples listed" "$tmp/y" \
  "$DSGAP" refreshstats --schedules a1,a2 --out "$tmp/y" --samples "$tmp/none.txt"
"$DSGAP" refreshstats --schedules a1,a2 --boot 0 --out "$tmp/b0" "${a1%.a1}" >/dev/null 2>"$tmp/err"
check "refreshstats --boot 0: exit 0, figures without intervals (gnuplot failed on nan bars once)" \
  bash -c "[ $? -eq 0 ] && ls '$tmp'/b0/figures/error_vs_anchors-*.png >/dev/null && grep -q 'no intervals' '$tmp'/b0/figures/error_vs_anchors-*.gp"

# gnuplot stopped by a file size limit (it wrote a cut PNG and exited 0 once, after the tables were
# published): nothing is published, the earlier output stays as it was
png=$(ls -S "$tmp"/b0/figures/*.png | head -1); png=$(stat -c %s "$png")
big=$(find "$tmp/b0" -type f ! -name '*.png' -printf '%s\n' | sort -n | tail -1)
lim=$(( (big + png) / 2 / 1024 ))
sums0=$(cd "$tmp/b0" && find . -type f | sort | xargs md5sum)
(ulimit -f "$lim"; "$DSGAP" refreshstats --schedules a1,a2 --boot 20 --out "$tmp/b0" "${a1%.a1}") >/dev/null 2>"$tmp/err"
check "refreshstats: gnuplot stopped by a file size limit ($lim KiB): exit 1, one line, the folder's files unchanged" \
  bash -c "[ $? -eq 1 ] && [ $big -lt $((lim * 1024)) ] && [ \$(wc -l < '$tmp/err') -eq 1 ] &&
    [ \"\$(cd '$tmp/b0' && find . -type f | sort | xargs md5sum)\" = '$sums0' ]"

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
  grep -q \"^| all layers | random | .* | \${want%% |*} | .* | \${want##*| } | [0-9]* | [0-9]* | 2 |\$\" '$tmp/as/attnstats.md'"
# units, clusters and samples of every row (per source), from attnstats.csv
awk -F, 'NR > 1 && $1 == "learned" { u["all"]++; u[$5]++; c["all," $2 "," $5 "," $6] = 1; c[$5 "," $2 "," $5 "," $6] = 1; s[$2] = 1 }
  END { for (k in c) { split(k, f, ","); nc[f[1]]++ }; for (k in s) ns++
    for (k in u) printf "%s %d %d %d\n", (k == "all" ? "all layers" : "layer " k), u[k], nc[k], ns }' "$tmp/as/attnstats.csv" | sort > "$tmp/aw"
awk -F' [|] ' '/^[|] (all layers|layer [0-9]+) [|] random [|]/ { sub(/ [|]$/, "", $9); printf "%s %s %s %s\n", substr($1, 3), $7, $8, $9 }' "$tmp/as/attnstats.md" | sort > "$tmp/ag"
check "attnstats: units, clusters and samples of the ΔH rows = attnstats.csv's (3 steps x 2 heads x 2 samples a layer)" \
  bash -c "[ \$(wc -l < '$tmp/aw') -eq 3 ] && grep -qx 'all layers 24 8 2' '$tmp/aw' && cmp -s '$tmp/aw' '$tmp/ag' || { diff '$tmp/aw' '$tmp/ag'; false; }"
check "attnstats: the layer tables carry the same counts" bash -c "
  [ \$(grep -c '^| [0-9]* | .* | 12 | 4 | 2 |\$' '$tmp/as/attnstats.md') -eq 4 ] && grep -q '(24 units in 8 clusters of 2 samples)' '$tmp/as/attnstats.md'"
check "attnstats: every interval holds its estimate" awk '
  { while (match($0, /[-0-9.]+ \[[-0-9.]+, [-0-9.]+\]/)) { s = substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH)
      gsub(/[][,]/, "", s); split(s, v, " "); n++; if (!(v[2] <= v[1] && v[1] <= v[3])) bad = 1 } }
  END { exit bad || n < 20 }' "$tmp/as/attnstats.md"
refused "attnstats: sources with other samples" "same samples in the same order" "$tmp/y" \
  "$DSGAP" attnstats --out "$tmp/y" a="$tmp/L/x1.h5,$tmp/L/x2.h5" b="$tmp/R/x2.h5,$tmp/R/x1.h5"
finish
