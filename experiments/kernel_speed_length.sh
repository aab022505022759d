#!/usr/bin/env bash
# kernel_speed_length.sh CALLS.csv CUDNN.csv DEST: speed against sequence length (issue 23 item 3), the
# tables and figures from two CSVs made on the GPU in one device call (experiments/kernel_speed.sh
# --length calls it; scripts/device_all.sh step `length` makes the CSVs):
#   CALLS.csv  dsgap callspeed: per path (dit: the DiT entry point, all heads at once, fast P.V; backend:
#              the replay's backend per head, fast and precise P.V), policy, density, n and heads: the
#              call's time with its metadata amortised over the refresh schedule (amortised_ms), our
#              dense kernel's (dense_ms)
#   CUDNN.csv  scripts/gpu_bench_torch.py --sweep: cuDNN SDPA dense per n and heads (cudnn_ms)
# Writes DEST/length.csv (every joined row: speedup = cudnn_ms / amortised_ms, and over our dense),
# DEST/crossover.{csv,md,tex} (per path, P.V mode, policy, density and heads: the crossover N below
# which the policy stops beating cuDNN dense: the smallest measured N from which it is faster at every
# larger N, interpolated log-log against the largest N below it where it is slower; "below N_min" when
# it wins at every N, "never" when it loses at the largest N; the speedup at 32760 tokens beside it;
# crossover.md also: each policy's metadata beside its attention at the N nearest 32760, fewest heads),
# DEST/figures/speed_vs_length-PATH-PV.{dat,gp,png,pdf} (speedup over cuDNN dense against N, log-log,
# one panel per head count, one line per policy, dense at 1). Bad input: one line, exit 1, nothing
# written.
# shellcheck shell=bash
set -euo pipefail
calls=${1:?usage: kernel_speed_length.sh CALLS.csv CUDNN.csv DEST} cudnn=${2:?CUDNN.csv} dest=${3:?DEST}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for f in "$calls" "$cudnn"; do [ -s "$f" ] || { echo "kernel_speed_length.sh: $f: no such file or empty" >&2; exit 1; }; done
[ "$(head -1 "$calls" | cut -d, -f1-15)" = "path,pv,policy,density_target,n,grid,heads,d,refresh_every,density,dense_ms,call_ms,anchor_ms,amortised_ms,meta_ms" ] ||
  { echo "kernel_speed_length.sh: $calls: not a dsgap callspeed CSV (header)" >&2; exit 1; }
[ "$(head -1 "$cudnn" | cut -d, -f1-4)" = "n,heads,d,cudnn_ms" ] ||
  { echo "kernel_speed_length.sh: $cudnn: not a gpu_bench_torch.py --sweep CSV (header)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kslen-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# the join (the last measurement of a key wins: a rerun appends)
awk -F, 'NR == FNR { if (FNR > 1) c[$1 "," $2] = $4; next }
  FNR == 1 { print "path,pv,policy,density_target,heads,n,refresh_every,density,call_ms,anchor_ms,amortised_ms,dense_ms,cudnn_ms,speedup,speedup_ours_dense,meta_ms"; next }
  { k = $5 "," $7; if (!(k in c)) { printf "kernel_speed_length.sh: %s:%d: no cuDNN time for n %s, heads %s\n", FILENAME, FNR, $5, $7 > "/dev/stderr"; bad = 1; exit 1 }
    if ($14 + 0 <= 0) { printf "kernel_speed_length.sh: %s:%d: amortised_ms %s is not positive\n", FILENAME, FNR, $14 > "/dev/stderr"; bad = 1; exit 1 }
    key = $1 "," $2 "," $3 "," $4 "," $7 "," $5
    if (!(key in row)) order[++n] = key
    row[key] = sprintf("%s,%s,%s,%s,%s,%s,%.6g,%.6g,%.6g,%s", $9, $10, $12, $13, $14, $11, c[k], c[k] / $14, $11 / $14, $15) }
  END { if (bad) exit 1; for (i = 1; i <= n; i++) print order[i] "," row[order[i]] }' "$cudnn" "$calls" > "$tmp/length.csv"
sort -t, -k1,1 -k2,2 -k5,5n -k3,3 -k4,4g -k6,6n -s <(tail -n +2 "$tmp/length.csv") > "$tmp/sorted"
# crossovers, per (path, pv, policy, rho, heads); rows of one key by n ascending
awk -F, 'function flush(   i, j, lo, x) {
    if (!nk) return
    j = 0 # the first index from which every speedup >= 1
    for (i = nk; i >= 1; i--) { if (s[i] < 1) break; j = i }
    if (j == 0) x = "never"
    else if (j == 1) x = "below " N[1]
    else { lo = j - 1; x = sprintf("%.0f", exp(log(N[lo]) + (log(N[j]) - log(N[lo])) * (0 - log(s[lo])) / (log(s[j]) - log(s[lo])))) }
    printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", kp, kv, kpol, krho, kh, x, (j ? N[j] : ""), at32, N[1], N[nk]
    nk = 0; at32 = "nan" }
  { key = $1 "," $2 "," $3 "," $4 "," $5
    if (key != last) { flush(); last = key; kp = $1; kv = $2; kpol = $3; krho = $4; kh = $5 }
    N[++nk] = $6; s[nk] = $14; if ($6 == 32760) at32 = $14 }
  BEGIN { print "path,pv,policy,density_target,heads,crossover_n,first_winning_n,speedup_at_32760,n_min,n_max"; at32 = "nan" }
  END { flush() }' <(grep -v ',dense,' "$tmp/sorted") > "$tmp/crossover.csv"
{
  echo "# Speed against sequence length: where each policy stops beating cuDNN dense"
  echo
  echo "Per attention call (all heads of a site), d = $(awk -F, 'NR == 2 { print $8 }' "$calls"), bf16, random Q/K/V; each policy's metadata amortised over its refresh schedule (refresh=anchor: the anchor's cost beyond a dense call spread over $(awk -F, 'NR > 1 && $9 > 1 { print $9; exit }' "$calls") calls, a 50-step run with warm-up 10 and one anchor; refresh=step: metadata in every call). cuDNN: PyTorch SDPA's cuDNN backend, all heads in one call. Crossover N: below it the policy is slower than cuDNN dense (log-log interpolation between the measured N); \"below N\" = faster at every measured N, \"never\" = slower at the largest. Device: $(awk -F, 'NR == 2 { print $17 }' "$calls"); $(awk -F, 'NR == 2 { print $18 ", commit " $19 }' "$calls")."
  for mode in $(cut -d, -f1,2 "$tmp/crossover.csv" | tail -n +2 | sort -u); do
    p=${mode%,*} v=${mode#*,}
    heads=$(awk -F, -v p="$p" -v v="$v" 'NR > 1 && $1 == p && $2 == v { print $5 }' "$tmp/crossover.csv" | sort -n -u | tr '\n' ' ')
    echo
    echo "## path \`$p\`, P·V $v"
    echo
    printf '| policy | ρ |'; for h in $heads; do printf ' crossover N (%s heads) | speedup at 32760 (%s heads) |' "$h" "$h"; done; echo
    printf '|:--|--:|'; for h in $heads; do printf -- '--:|--:|'; done; echo
    awk -F, -v p="$p" -v v="$v" -v hl="$heads" 'BEGIN { nh = split(hl, H, " ") }
      NR > 1 && $1 == p && $2 == v { k = $3 "," $4; if (!(k in seen)) { seen[k] = 1; o[++n] = k }; x[k, $5] = ($6 == "never" ? "never (to " $10 ")" : $6); s[k, $5] = $8 }
      END { for (i = 1; i <= n; i++) { split(o[i], kk, ","); printf "| `%s` | %s |", kk[1], kk[2]
        for (j = 1; j <= nh; j++) { c = x[o[i], H[j]]; printf " %s | %s |", (c == "" ? "—" : c), (s[o[i], H[j]] == "" || s[o[i], H[j]] == "nan" ? "—" : sprintf("%.2f×", s[o[i], H[j]])) }
        print "" } }' "$tmp/crossover.csv"
  done
  # the metadata beside the attention at the N nearest 32760 and the fewest heads (issue 23's table)
  read -r mn mh < <(awk -F, '{ d = $6 - 32760; d = d < 0 ? -d : d; if (!n || d < bd || (d == bd && $5 < h)) { bd = d; n = $6; h = $5 } } END { print n, h }' "$tmp/sorted")
  echo
  echo "## Metadata beside attention at $mn tokens, $mh heads"
  echo
  echo "Per call; metadata of one refresh (the anchor's for refresh=anchor policies, a call's for refresh=step), spread over its calls; attention = the call without its metadata. A ratio above 1: the policy's metadata costs more than its own attention."
  echo
  echo "| path | P·V | policy | ρ | attention ms | metadata ms a refresh | refresh every | metadata ms a call | metadata / attention |"
  echo "|:--|:--|:--|--:|--:|--:|--:|--:|--:|"
  awk -F, -v n="$mn" -v h="$mh" '$6 == n && $5 == h && $3 != "dense" { att = $9 - ($7 == 1 ? $16 : 0); pc = $16 / $7
    printf "| %s | %s | `%s` | %s | %.3f | %.3f | %s | %.3f | %s |\n", $1, $2, $3, $4, att, $16, $7, pc, (att > 0 ? sprintf("%.2f", pc / att) : "—") }' "$tmp/sorted"
} > "$tmp/crossover.md"
{
  echo "% crossover.tex: made by experiments/kernel_speed_length.sh from $(basename "$calls") and $(basename "$cudnn"). Needs \\usepackage{booktabs}."
  echo "\\begin{tabular}{lllrrlr}"
  echo "\\toprule"
  echo "Path & P\\,V & Policy & \$\\rho\$ & Heads & Crossover \$N\$ & Speedup at 32760 \\\\"
  echo "\\midrule"
  awk -F, 'NR > 1 { p = $3; gsub(/_/, "\\_", p); printf "%s & %s & \\texttt{%s} & %s & %s & %s & %s \\\\\n", $1, $2, p, $4, $5, $6, ($8 == "nan" ? "---" : sprintf("$%.2f\\times$", $8)) }' "$tmp/crossover.csv"
  echo "\\bottomrule"
  echo "\\end{tabular}"
} > "$tmp/crossover.tex"
# figures: one per (path, pv); panels per heads; one block per policy@rho within a panel
mkdir -p "$tmp/figures"
for mode in $(cut -d, -f1,2 "$tmp/sorted" | sort -u); do
  p=${mode%,*} v=${mode#*,} name=speed_vs_length-${mode/,/-}
  heads=$(awk -F, -v p="$p" -v v="$v" '$1 == p && $2 == v { print $5 }' "$tmp/sorted" | sort -n -u | tr '\n' ' ')
  {
    echo "# $name.dat: speedup over cuDNN dense (cudnn_ms / amortised_ms) against n; path $p, P.V $v"
    echo "# columns: n speedup amortised_ms cudnn_ms; one block per heads x policy@rho (see the .gp's titles)"
    for h in $heads; do
      for k in $(awk -F, -v p="$p" -v v="$v" -v h="$h" '$1 == p && $2 == v && $5 == h && !seen[$3 "@" $4]++ { print $3 "@" $4 }' "$tmp/sorted"); do
        echo "# heads $h policy $k"
        awk -F, -v p="$p" -v v="$v" -v h="$h" -v k="$k" '$1 == p && $2 == v && $5 == h && $3 "@" $4 == k { print $6, $14, $11, $13 }' "$tmp/sorted"
        printf '\n\n'
      done
    done
  } > "$tmp/figures/$name.dat"
  nh=$(echo "$heads" | wc -w)
  {
    echo "# $name.gp: speedup over cuDNN dense against sequence length (experiments/kernel_speed_length.sh)"
    echo "# re-render inside this directory: gnuplot $name.gp"
    echo "load 'style.gp'"
    echo "do for [fmt in \"pdf png\"] {"
    echo "if (fmt eq \"pdf\") { set terminal pdfcairo size $((nh * 3)).4in,3.6in font 'Liberation Sans,8' } else { set terminal pngcairo size $((nh * 1020)),1080 font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
    echo "set output '$name.'.fmt"
    echo "set multiplot layout 1,$nh title 'one attention call, metadata amortised: path $p, P.V $v (cuDNN dense = 1)' noenhanced"
    echo "set logscale xy"
    echo "set autoscale xfix"
    echo "set offsets graph 0.03, graph 0.03, 0, 0"
    echo "set xlabel 'tokens N'"
    echo "set format x '%.0s%c'"
    echo "set key bottom right noenhanced font ',6' samplen 2"
    i=0
    for h in $heads; do
      echo "set title '$h heads'"
      [ "$i" = 0 ] && echo "set ylabel 'cuDNN dense time / policy time'" || echo "unset ylabel"
      printf "plot 1 with lines ls 9 dt 2 title 'cuDNN dense'"
      j=0
      for k in $(awk -F, -v p="$p" -v v="$v" -v h="$h" '$1 == p && $2 == v && $5 == h && !seen[$3 "@" $4]++ { print $3 "@" $4 }' "$tmp/sorted"); do
        idx=$(grep '^# heads' "$tmp/figures/$name.dat" | grep -n -x "# heads $h policy $k" | cut -d: -f1)
        t=$k; [ "$k" = dense@1 ] && t="our dense kernel"
        printf ", \\\\\n  '%s.dat' index %d using 1:2 with linespoints ls %d title '%s'" "$name" $((idx - 1)) $((j % 15 + 1)) "$t"
        j=$((j + 1))
      done
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
echo "kernel_speed_length.sh: $(($(wc -l < "$dest/crossover.csv") - 1)) crossovers -> $dest/crossover.{csv,md,tex}, length.csv, figures/speed_vs_length-*.png" >&2
