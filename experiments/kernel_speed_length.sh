#!/usr/bin/env bash
# kernel_speed_length.sh CALLS.csv CUDNN.csv DEST: speed against sequence length (issue 23 item 3), the
# tables and figures from two CSVs made on the GPU in one device call (experiments/kernel_speed.sh
# --length calls it; scripts/device_all.sh step `length` makes the CSVs):
#   CALLS.csv  dsgap callspeed: per path (dit: the DiT entry point, all heads at once, fast P.V; backend:
#              the replay's backend per head, fast and precise P.V), policy, density, n and heads: the
#              call's time with its metadata amortised over the refresh schedule (amortised_ms), our
#              dense kernel's (dense_ms)
#   CUDNN.csv  scripts/gpu_bench_torch.py --sweep: cuDNN SDPA dense per n and heads (cudnn_ms); or the
#              word `ours` where no sweep was measured: the reference is then each path's own dense
#              call (our flash kernel: the dense rows of CALLS.csv), and every table and figure says so
# Writes DEST/length.csv (every joined row: speedup = cudnn_ms / amortised_ms, and over our dense;
# reps: a row of reps 1 is the warm-up instance's one timed call: callspeed's --max-call),
# DEST/crossover.{csv,md,tex} (per path, P.V mode, policy, density and heads: the
# crossover N below which the policy stops beating the reference: the smallest measured N from which
# it is faster at every larger N, interpolated log-log against the largest N below it where it is
# slower; "below N_min" when it wins at every N, "never" when it loses at the largest N; rows whose
# computed density is more than 0.02 from the target (off budget, issue 23 item 0) are left out of the
# crossovers and figures and named under each table, "off-budget" (crossover.md: "cannot reach ρ")
# when a policy has no other row at that head count; the speedup
# at 32760 tokens beside it; the last column names the reference, cudnn_dense or our_dense;
# crossover.md also: each policy's metadata beside its attention at the N nearest 32760, fewest
# heads), DEST/figures/speed_vs_length-PATH-PV.{dat,gp,png,pdf} (speedup over the reference against
# N, log-log, one panel per head count, one line per policy through its steady-state rows, a row of
# reps 1 a ringed point of its own, not joined; the reference at 1; the y floor 1.5x or more below
# the smallest speedup; the title names the device and date). Bad input: one line, exit 1, nothing written.
# shellcheck shell=bash
set -euo pipefail
calls=${1:?usage: kernel_speed_length.sh CALLS.csv CUDNN.csv|ours DEST} cudnn=${2:?CUDNN.csv or ours} dest=${3:?DEST}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh" # EXP_AWK_SIG3: the tables' numbers to 3 significant figures
ref=cudnn
[ "$cudnn" = ours ] && ref=ours
for f in "$calls" $([ $ref = ours ] || echo "$cudnn"); do [ -s "$f" ] || { echo "kernel_speed_length.sh: $f: no such file or empty" >&2; exit 1; }; done
[ "$(head -1 "$calls" | cut -d, -f1-15)" = "path,pv,policy,density_target,n,grid,heads,d,refresh_every,density,dense_ms,call_ms,anchor_ms,amortised_ms,meta_ms" ] ||
  { echo "kernel_speed_length.sh: $calls: not a dsgap callspeed CSV (header)" >&2; exit 1; }
if [ $ref = cudnn ] && [ "$(head -1 "$cudnn" | cut -d, -f1-4)" != "n,heads,d,cudnn_ms" ]; then
  if head -1 "$cudnn" | grep -q '^cudnn_ms,'; then # gpu_bench_torch.py without --sweep: one n, one head count
    echo "kernel_speed_length.sh: $cudnn: gpu_bench_torch.py's kernel benchmark (one n), not its --sweep CSV: measure the sweep, or pass 'ours' to compare with our dense kernel" >&2
  else
    echo "kernel_speed_length.sh: $cudnn: not a gpu_bench_torch.py --sweep CSV (header)" >&2
  fi
  exit 1
fi
# the reference: its name in the tables and figures, and the length.csv column of the speedup over it
if [ $ref = ours ]; then
  rname="our dense kernel" rshort=our_dense sc=15 cudnn=/dev/null
else
  rname="cuDNN dense" rshort=cudnn_dense sc=14
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kslen-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the device, date and commit of the first row (the device field is quoted and holds commas)
device=$(awk 'NR == 2 { d = ""; if (match($0, /"[^"]*"/)) d = substr($0, RSTART + 1, RLENGTH - 2); else { split($0, f, ","); d = f[17] }
  sub(/^gpu: /, "", d); print d; exit }' "$calls")
read -r rdate rcommit < <(awk 'NR == 2 { n = split($0, f, ","); print f[n - 1], f[n]; exit }' "$calls")
# each measurement's (path, heads) and when and from which commit (a table may join device calls)
runs=$(awk 'NR > 1 { n = split($0, f, ","); k = "path " $1 " at " f[7] " heads: " f[n - 1] ", commit " f[n]
  if (!(k in seen)) { seen[k] = 1; out = out (out == "" ? "" : "; ") k } } END { print out }' FS=, "$calls")
dev_short=${device%% (*}
# the join (the last measurement of a key wins: a rerun appends)
awk -F, -v ref=$ref -v cf="$cudnn" 'FILENAME == cf { if (FNR > 1) c[$1 "," $2] = $4; next }
  FNR == 1 { print "path,pv,policy,density_target,heads,n,refresh_every,density,call_ms,anchor_ms,amortised_ms,dense_ms,cudnn_ms,speedup,speedup_ours_dense,meta_ms,reps"; next }
  { k = $5 "," $7; if (ref == "cudnn" && !(k in c)) { printf "kernel_speed_length.sh: %s:%d: no cuDNN time for n %s, heads %s\n", FILENAME, FNR, $5, $7 > "/dev/stderr"; bad = 1; exit 1 }
    if ($14 + 0 <= 0) { printf "kernel_speed_length.sh: %s:%d: amortised_ms %s is not positive\n", FILENAME, FNR, $14 > "/dev/stderr"; bad = 1; exit 1 }
    key = $1 "," $2 "," $3 "," $4 "," $7 "," $5
    if (!(key in row)) order[++n] = key
    row[key] = sprintf("%s,%s,%s,%s,%s,%s,%s,%s,%.6g,%s,%s", $9, $10, $12, $13, $14, $11, (ref == "cudnn" ? c[k] : "nan"),
      (ref == "cudnn" ? sprintf("%.6g", c[k] / $14) : "nan"), $11 / $14, $15, $16) }
  END { if (bad) exit 1; for (i = 1; i <= n; i++) print order[i] "," row[order[i]] }' "$cudnn" "$calls" > "$tmp/length.csv"
sort -t, -k1,1 -k2,2 -k5,5n -k3,3 -k4,4g -k6,6n -s <(tail -n +2 "$tmp/length.csv") > "$tmp/sorted"
# matched budgets (issue 23 item 0): a policy's row whose computed density is more than 0.02 from its
# target is off budget: left out of the crossovers and the figures, and named instead ($tmp/offrows:
# path,pv,policy,rho,heads,n,density); $tmp/onb: the rows compared (dense's and the on-budget ones)
awk -F, -v off="$tmp/offrows" '$3 != "dense" && ($8 - $4 > 0.02 + 1e-9 || $4 - $8 > 0.02 + 1e-9) {
    print $1 "," $2 "," $3 "," $4 "," $5 "," $6 "," $8 > off; next } { print }' "$tmp/sorted" > "$tmp/onb"
touch "$tmp/offrows"
# crossovers, per (path, pv, policy, rho, heads); rows of one key by n ascending
awk -F, -v sc=$sc -v rs=$rshort 'function flush(   i, j, lo, x) {
    if (!nk) return
    j = 0 # the first index from which every speedup >= 1
    for (i = nk; i >= 1; i--) { if (s[i] < 1) break; j = i }
    if (j == 0) x = "never"
    else if (j == 1) x = "below " N[1]
    else { lo = j - 1; x = sprintf("%.0f", exp(log(N[lo]) + (log(N[j]) - log(N[lo])) * (0 - log(s[lo])) / (log(s[j]) - log(s[lo])))) }
    printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", kp, kv, kpol, krho, kh, x, (j ? N[j] : ""), at32, N[1], N[nk], rs
    nk = 0; at32 = "nan" }
  { key = $1 "," $2 "," $3 "," $4 "," $5
    if (key != last) { flush(); last = key; kp = $1; kv = $2; kpol = $3; krho = $4; kh = $5 }
    N[++nk] = $6; s[nk] = $sc; if ($6 == 32760) at32 = $sc }
  BEGIN { print "path,pv,policy,density_target,heads,crossover_n,first_winning_n,speedup_at_32760,n_min,n_max,reference"; at32 = "nan" }
  END { flush() }' <(grep -v ',dense,' "$tmp/onb") > "$tmp/crossover.csv"
# a (path, pv, policy, rho, heads) off budget at every N: crossover_n "off-budget" (its N range measured)
awk -F, -v rs=$rshort 'FILENAME == ARGV[1] { if (FNR > 1) has[$1 "," $2 "," $3 "," $4 "," $5] = 1; next }
  { k = $1 "," $2 "," $3 "," $4 "," $5; if (k in has) next
    if (!(k in lo)) { o[++n] = k; lo[k] = $6 }; hi[k] = $6 }
  END { for (i = 1; i <= n; i++) printf "%s,off-budget,,nan,%s,%s,%s\n", o[i], lo[o[i]], hi[o[i]], rs }' "$tmp/crossover.csv" "$tmp/offrows" >> "$tmp/crossover.csv"
{
  echo "# Speed against sequence length: where each policy stops beating $rname"
  echo
  if [ $ref = ours ]; then
    refline="Reference: each path's own dense call (our flash kernel, all heads; the dense rows of the same \`dsgap callspeed\` run): no cuDNN sweep was measured, so every speedup and crossover here is against our dense kernel, not cuDNN."
  else
    refline="cuDNN: PyTorch SDPA's cuDNN backend, all heads in one call."
  fi
  echo "Per attention call (all heads of a site), d = $(awk -F, 'NR == 2 { print $8 }' "$calls"), bf16, random Q/K/V; each policy's metadata amortised over its refresh schedule (refresh=anchor: the anchor's cost beyond a dense call spread over $(awk -F, 'NR > 1 && $9 > 1 { print $9; exit }' "$calls") calls, a 50-step run with warm-up 10 and one anchor; refresh=step: metadata in every call). $refline Crossover N: below it the policy is slower than $rname (log-log interpolation between the measured N); \"below N\" = faster at every measured N, \"never (to N)\" = slower at the largest N it was measured at; \"cannot reach ρ\" = its computed density was more than 0.02 from ρ at every measured N (its rows are named below the table; a policy off budget at some N only is compared at the others); — = not measured (the sweep drops a policy after a call over its --max-call, and stops at its --budget). Device: $device; measured $runs. Times and ratios to 3 significant figures (\`length.csv\`, \`crossover.csv\`: as computed)."
  for mode in $(cut -d, -f1,2 "$tmp/crossover.csv" | tail -n +2 | sort -u); do
    p=${mode%,*} v=${mode#*,}
    heads=$(awk -F, -v p="$p" -v v="$v" 'NR > 1 && $1 == p && $2 == v { print $5 }' "$tmp/crossover.csv" | sort -n -u | tr '\n' ' ')
    echo
    echo "## path \`$p\`, P·V $v"
    echo
    printf '| policy | ρ |'; for h in $heads; do printf ' crossover N (%s heads) | speedup at 32760 (%s heads) |' "$h" "$h"; done; echo
    printf '|:--|--:|'; for h in $heads; do printf -- '--:|--:|'; done; echo
    awk -F, -v p="$p" -v v="$v" -v hl="$heads" "$EXP_AWK_SIG3"' BEGIN { nh = split(hl, H, " ") }
      NR > 1 && $1 == p && $2 == v { k = $3 "," $4; if (!(k in seen)) { seen[k] = 1; o[++n] = k }; x[k, $5] = $6; top[k, $5] = $10; s[k, $5] = $8
        if ($10 + 0 > nmax[$5]) nmax[$5] = $10 + 0 }
      END { for (i = 1; i <= n; i++) { split(o[i], kk, ","); printf "| `%s` | %s |", kk[1], kk[2]
        for (j = 1; j <= nh; j++) { c = x[o[i], H[j]]   # measured only to a smaller N than the others: say to which
          if (c == "off-budget") c = "cannot reach ρ"
          else if (c == "never" || (c != "" && top[o[i], H[j]] + 0 < nmax[H[j]])) c = c " (to " top[o[i], H[j]] ")"
          printf " %s | %s |", (c == "" ? "—" : c), (s[o[i], H[j]] == "" || s[o[i], H[j]] == "nan" ? "—" : sig3(s[o[i], H[j]]) "×") }
        print "" } }' "$tmp/crossover.csv"
    # the rows left out: per policy, its computed densities and where
    # (one entry per policy and its densities, the head counts that share them named together)
    awk -F, -v p="$p" -v v="$v" "$EXP_AWK_SIG3"' $1 == p && $2 == v { k = $3 SUBSEP $4 SUBSEP $5; if (!(k in d)) o[++n] = k
        d[k] = d[k] (d[k] == "" ? "" : ", ") sig3($7) " at " $6 }
      END { if (!n) exit
        for (i = 1; i <= n; i++) { split(o[i], f, SUBSEP); e = "`" f[1] "` (ρ " f[2] ") " d[o[i]]
          if (!(e in hs)) eo[++m] = e; hs[e] = hs[e] (hs[e] == "" ? "" : ", ") f[3] }
        printf "\nOff budget (computed density more than 0.02 from ρ: not compared above, nor drawn in the figure):"
        for (i = 1; i <= m; i++) { e = eo[i]; j = index(e, ") "); printf "%s %s; %s heads): %s", (i > 1 ? ";" : ""), substr(e, 1, j - 1), hs[e], substr(e, j + 2) }
        print "." }' "$tmp/offrows"
  done
  # the metadata beside the attention at the N nearest 32760 and the fewest heads (issue 23's table)
  read -r mn mh < <(awk -F, '{ d = $6 - 32760; d = d < 0 ? -d : d; if (!n || d < bd || (d == bd && $5 < h)) { bd = d; n = $6; h = $5 } } END { print n, h }' "$tmp/sorted")
  echo
  echo "## Metadata beside attention at $mn tokens, $mh heads"
  echo
  echo "Per call. Metadata of one refresh: for refresh=anchor policies the anchor's cost beyond a dense call (path dit) or the anchor's metadata (path backend), spread over its calls; for refresh=step policies a call's metadata (meta_ms), inside the call. Attention = the call without that metadata. Path backend's metadata is wall time (device and host); path dit's meta_ms of a refresh=step policy is the call less its sparse attention's device time: what the metadata adds to the call, host share included, work the GPU overlaps (a head's block take on a side stream during the next head's scores) not counted (rows dated before 2026-12-06T14:00Z: the metadata's device time, the same while nothing overlapped, but without the host share). A ratio above 1: the policy's metadata costs more than its own attention. reps 1 (*): one call timed, the warm-up instance's, which took over --max-call (rows of a dsgap built before commit df9e464: the policy's first call, one-time costs such as a cold k-means or a static mask's first build included; since: its second call, those costs left out of every row). Density †: more than 0.02 from ρ (off budget: not compared above)."
  echo
  echo "| path | P·V | policy | ρ | attention ms | metadata ms a refresh | refresh every | metadata ms a call | metadata / attention | call ms | density |"
  echo "|:--|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, -v n="$mn" -v h="$mh" "$EXP_AWK_SIG3"' $6 == n && $5 == h && $3 != "dense" { m = ($7 > 1 && $1 == "dit" ? $10 : $16); att = $9 - ($7 == 1 ? m : 0); pc = m / $7
    printf "| %s | %s | `%s`%s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, ($17 == 1 ? " *" : ""), $4, sig3(att), sig3(m), $7, sig3(pc), (att > 0 ? sig3(pc / att) : "—"), sig3($9), sig3($8) ($8 - $4 > 0.02 + 1e-9 || $4 - $8 > 0.02 + 1e-9 ? " †" : "") }' "$tmp/sorted"
} > "$tmp/crossover.md"
{
  echo "% crossover.tex: made by experiments/kernel_speed_length.sh from $(basename "$calls")$([ $ref = ours ] && echo " (reference: our dense kernel, no cuDNN sweep)" || echo " and $(basename "$cudnn")"). Needs \\usepackage{booktabs}."
  echo "\\begin{table*}[t]" # the page of a two-column paper (issue 49)
  echo "\\centering"
  echo "\\small"
  echo "\\caption{Speed against sequence length: per path, P\\,V mode, policy, target density and heads, the crossover length \$N\$ below which the policy stops beating $rname (never: slower at the largest \$N\$), and its speedup at 32760 tokens; $dev_short, ${rdate%%T*}.}"
  echo "\\label{tab:crossover}"
  echo "\\begin{tabular}{lllrrlr}"
  echo "\\toprule"
  echo "Path & P\\,V & Policy & \$\\rho\$ & Heads & Crossover \$N\$ & Speedup at 32760 \\\\"
  echo "\\midrule"
  awk -F, "$EXP_AWK_SIG3"' NR > 1 { p = $3; gsub(/_/, "\\_", p); printf "%s & %s & \\texttt{%s} & %s & %s & %s & %s \\\\\n", $1, $2, p, $4, $5, $6, ($8 == "nan" ? "---" : "$" sig3($8) "\\times$") }' "$tmp/crossover.csv"
  echo "\\bottomrule"
  echo "\\end{tabular}"
  echo "\\end{table*}"
} > "$tmp/crossover.tex"
# figures: one per (path, pv); panels per heads; one block per policy@rho within a panel, then one
# block per panel of the rows of reps 1 (the warm-up instance's one timed call), ringed
mkdir -p "$tmp/figures"
styles=(1 2 3 4 5 6 10 11 12 13 14 15 7) # line styles of style.gp for the policies: black (8) is the reference's, grey (9) and yellow (7, last) read poorly
for mode in $(cut -d, -f1,2 "$tmp/onb" | sort -u); do
  p=${mode%,*} v=${mode#*,} name=speed_vs_length-${mode/,/-}
  heads=$(awk -F, -v p="$p" -v v="$v" '$1 == p && $2 == v { print $5 }' "$tmp/onb" | sort -n -u | tr '\n' ' ')
  # the policies of this mode in one order (the same line style in every panel); dense is the
  # reference line itself when the reference is our dense kernel
  pols=$(awk -F, -v p="$p" -v v="$v" -v ref=$ref '$1 == p && $2 == v && !seen[$3 "@" $4]++ && !(ref == "ours" && $3 == "dense") { print $3 "@" $4 }' "$tmp/onb")
  # axes: y from a 1-2-5 value at least 1.5x below the smallest speedup of the mode (a point at
  # the floor would hide in the axis) to the whole decade above the largest, x to a third past
  # its largest N
  read -r ylo yhi xmax < <(awk -F, -v p="$p" -v v="$v" -v sc=$sc '$1 == p && $2 == v && $sc > 0 { if (!lo || $sc < lo) lo = $sc; if ($sc > hi) hi = $sc; if ($6 > nx) nx = $6 }
    END { if (!lo) lo = 0.1; if (!hi) hi = 10; f = lo / 1.5; a = 1; while (a > f) a /= 10; if (5 * a <= f) a *= 5; else if (2 * a <= f) a *= 2
      b = 1; while (b < hi) b *= 10; print a, b, int(nx * 4 / 3) }' "$tmp/onb")
  xt=$(awk -v m="$xmax" 'BEGIN { for (n = 1024; n < m; n *= 2) printf "%s\x27%dk\x27 %d", (n > 1024 ? ", " : ""), n / 1024, n }')
  {
    echo "# $name.dat: speedup over $rname ($([ $ref = ours ] && echo dense_ms || echo cudnn_ms) / amortised_ms) against n; path $p, P.V $v"
    echo "# columns: n speedup amortised_ms reference_ms reps; one block per heads x policy@rho, then per heads the rows of reps 1 (see the .gp's titles); a block with nothing measured: one line of nan"
    for h in $heads; do
      for k in $pols; do
        echo "# heads $h policy $k"
        awk -F, -v p="$p" -v v="$v" -v h="$h" -v k="$k" -v sc=$sc -v ref=$ref '$1 == p && $2 == v && $5 == h && $3 "@" $4 == k { print $6, $sc, $11, (ref == "ours" ? $12 : $13), $17; r++ } END { if (!r) print "nan nan nan nan nan" }' "$tmp/onb"
        printf '\n\n'
      done
    done
    for h in $heads; do
      echo "# reps 1, heads $h"
      awk -F, -v p="$p" -v v="$v" -v h="$h" -v sc=$sc -v ref=$ref '$1 == p && $2 == v && $5 == h && $17 == 1 { print $6, $sc, $11, (ref == "ours" ? $12 : $13), $17; r++ } END { if (!r) print "nan nan nan nan nan" }' "$tmp/onb"
      printf '\n\n'
    done
  } > "$tmp/figures/$name.dat"
  nh=$(echo "$heads" | wc -w) npols=$(echo "$pols" | wc -w)
  # the layout in png pixels (the pdf is the same at 340 px an inch): the y axis' labels, the
  # panels, the gaps between them (their y labels are the first panel's), the key outside the data
  L=230 P=1020 G=80 K=780 H=1080
  W=$((L + nh * P + (nh - 1) * G + K))
  {
    echo "# $name.gp: speedup over $rname against sequence length (experiments/kernel_speed_length.sh)"
    echo "# re-render inside this directory: gnuplot $name.gp"
    echo "load 'style.gp'"
    echo "do for [fmt in \"pdf png\"] {"
    echo "if (fmt eq \"pdf\") { set terminal pdfcairo size $(awk -v w=$W -v h=$H 'BEGIN { printf "%.2fin,%.2fin", w / 340, h / 340 }') font 'Liberation Sans,8' } else { set terminal pngcairo size $W,$H font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
    echo "set output '$name.'.fmt"
    echo "set multiplot title 'one attention call, metadata amortised: path $p, P·V $v, against $rname ($dev_short, ${rdate%%T*})' noenhanced"
    echo "set logscale xy"
    echo "set xrange [768:$xmax]"
    echo "set xtics ($xt)"
    echo "set yrange [$ylo:$yhi]"
    echo "set xlabel 'tokens N'"
    echo "set tmargin at screen 0.84; set bmargin at screen 0.17"
    echo "set key off"
    i=0
    for h in $heads; do
      echo "set lmargin at screen $(awk -v x=$((L + i * (P + G))) -v w=$W 'BEGIN { printf "%.4f", x / w }'); set rmargin at screen $(awk -v x=$((L + i * (P + G) + P)) -v w=$W 'BEGIN { printf "%.4f", x / w }')"
      echo "set title '$h heads'"
      if [ "$i" = 0 ]; then echo "set ylabel '$rname time / policy time'; set format y '%g'"; else echo "unset ylabel; set format y ''"; fi
      last=$([ "$i" = $((nh - 1)) ] && echo 1 || echo 0)
      [ $last = 1 ] && echo "set key at screen $(awk -v x=$((L + nh * P + (nh - 1) * G + 40)) -v w=$W 'BEGIN { printf "%.4f", x / w }'), graph 0.5 left center vertical Left reverse noenhanced font ',7' samplen 2 spacing 1.0"
      printf "plot 1 with lines lc rgb '#000000' lw 1 dt 2 %s" "$([ $last = 1 ] && echo "title '$rname = 1'" || echo notitle)"
      j=0 jd=0
      for k in $pols; do
        idx=$((i * npols + j + 1))
        t=${k/\/budget=matched/ (matched)}
        t="${t%@*}, ρ ${k##*@}"
        [ "$k" = dense@1 ] && t="our dense kernel"
        ls=${styles[(j - ${jd:-0}) % ${#styles[@]}]}
        [ "$k" = dense@1 ] && ls=9 jd=1 # our dense kernel (against cuDNN): grey, the policies keep their colours
        rows=$(awk -F, -v p="$p" -v v="$v" -v h="$h" -v k="$k" '$1 == p && $2 == v && $5 == h && $3 "@" $4 == k' "$tmp/onb" | wc -l)
        # steady-state rows joined; a reps-1 row (the warm-up instance's timed call) a point of its own, ringed below
        if [ "$rows" -gt 0 ]; then printf ", \\\\\n  '%s.dat' index %d using 1:(\$5 == 1 ? NaN : \$2) with linespoints ls %d notitle, \\\\\n  '%s.dat' index %d using 1:(\$5 == 1 ? \$2 : NaN) with points ls %d notitle" "$name" $((idx - 1)) "$ls" "$name" $((idx - 1)) "$ls"; fi
        if [ $last = 1 ]; then printf ", \\\\\n  NaN with linespoints ls %d title '%s'" "$ls" "$t"; fi
        j=$((j + 1))
      done
      idx=$((nh * npols + i + 1))
      if [ -n "$(awk -F, -v p="$p" -v v="$v" -v h="$h" '$1 == p && $2 == v && $5 == h && $17 == 1' "$tmp/onb")" ]; then
        printf ", \\\\\n  '%s.dat' index %d using 1:2 with points pt 6 ps 2.2 lc rgb '#000000' notitle" "$name" $((idx - 1))
      fi
      if [ $last = 1 ] && [ -n "$(awk -F, -v p="$p" -v v="$v" '$1 == p && $2 == v && $17 == 1' "$tmp/onb")" ]; then
        printf ", \\\\\n  NaN with points pt 6 ps 2.2 lc rgb '#000000' title 'one call timed (reps 1), not joined'"
      fi
      # the policies off budget at every N of this mode: named in the key, not drawn
      offp=$(awk -F, -v p="$p" -v v="$v" '$1 == p && $2 == v && $6 == "off-budget" && !seen[$3]++ { sub(/\/budget=matched/, "", $3); printf "%s%s", (n++ ? ", " : ""), $3 }' "$tmp/crossover.csv")
      if [ $last = 1 ] && [ -n "$offp" ]; then
        printf ", \\\\\n  NaN with dots lc rgb '#ffffff' title 'not drawn, off budget: %s'" "$offp"
      fi
      echo
      i=$((i + 1))
    done
    echo "unset multiplot"
    echo "unset output"
    echo "}"
  } > "$tmp/figures/$name.gp"
done
cp "$here/../analysis/style.gp" "$tmp/figures/"
if command -v gnuplot > /dev/null; then
  for g in "$tmp"/figures/*.gp; do
    [ "$(basename "$g")" = style.gp ] && continue
    (cd "$tmp/figures" && gnuplot "$(basename "$g")")
  done
else
  echo "kernel_speed_length.sh: no gnuplot: the .gp files are written, not rendered" >&2
fi
# published together
mkdir -p "$dest/figures"
rm -f "$dest"/figures/speed_vs_length-*
mv "$tmp/length.csv" "$tmp/crossover.csv" "$tmp/crossover.md" "$tmp/crossover.tex" "$dest/"
mv "$tmp"/figures/speed_vs_length-* "$dest/figures/"
[ -e "$dest/figures/style.gp" ] || mv "$tmp/figures/style.gp" "$dest/figures/"
echo "kernel_speed_length.sh: $(($(wc -l < "$dest/crossover.csv") - 1)) crossovers against $rname -> $dest/crossover.{csv,md,tex}, length.csv, figures/speed_vs_length-*.png" >&2
