#!/usr/bin/env bash
# samples_fig.sh DIR [RHO]: the per-sample figure of a sample-set decomposition (issue 19), from
# DIR/{decomposition,ablation}{,-samples}.csv (dsgap decompose DIR1 DIR2 ... --out DIR):
#   DIR/figures/samples-rhoRHO.{dat,gp,png,pdf}: at target density RHO (default 0.15; the table's
#   closest density), one row per sample and a first row "all samples" (the pooled estimate with its
#   two-level 95% interval): (a) the ladder's sources selection, grouping, lost contributions;
#   (b) the factorial's Shapley shares phi_G, phi_S, phi_R. A zero line shows which samples flip sign.
# shellcheck shell=bash
set -euo pipefail
dir=$1 want=${2:-0.15}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fig=$dir/figures
mkdir -p "$fig"
# the density of the tables closest to the wanted one
rho=$(awk -F, -v w="$want" 'NR > 1 { d = $1 - w; if (d < 0) d = -d; if (best == "" || d < bd) { best = $1; bd = d } } END { print best }' \
  "$dir/decomposition.csv" "$dir/ablation.csv" 2>/dev/null)
[ -n "$rho" ] || { echo "samples_fig.sh: no table in $dir" >&2; exit 1; }
name=samples-rho$rho
# the computed density (est-block's) beside the target in the title
computed=$(awk -F, -v r="$rho" '$1 + 0 == r + 0 && $2 == "all" && $3 == "E(est-block)" { printf "%.3g", $10; exit }' \
  "$dir/decomposition.csv")
# columns: row label sel grp lost phiG phiS phiR, then lo hi of each (NaN for the samples)
awk -F, -v rho="$rho" '
  FNR == 1 { file++; next }
  $1 + 0 != rho + 0 || $2 != "all" { if (file <= 2) next }
  file <= 2 { est[$3] = $4; lo[$3] = $5; hi[$3] = $6; next }
  file >= 3 && $2 + 0 == rho + 0 && $3 == "all" {
    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
    v[$1, $4] = $5 }
  END {
    split("selection grouping lost shapley_G shapley_S shapley_R", q, " ")
    print "# " "'"$name"'" ".dat: per sample at density_target " rho " (row 0: all samples pooled, with the two-level 95% interval; for a sample lo = hi = its estimate)"
    print "# columns: row label selection grouping lost shapley_G shapley_S shapley_R, then lo hi of each in that order"
    printf "0 \"all samples\""
    for (i = 1; i <= 6; i++) printf " %s", (q[i] in est) ? est[q[i]] : "nan"
    for (i = 1; i <= 6; i++) printf " %s %s", (q[i] in lo) ? lo[q[i]] : "nan", (q[i] in hi) ? hi[q[i]] : "nan"
    printf "\n"
    for (r = 1; r <= n; r++) {
      s = order[r]; printf "%d \"%s\"", r, s
      for (i = 1; i <= 6; i++) printf " %s", ((s, q[i]) in v) ? v[s, q[i]] : "nan"
      for (i = 1; i <= 6; i++) printf " %s %s", ((s, q[i]) in v) ? v[s, q[i]] : "nan", ((s, q[i]) in v) ? v[s, q[i]] : "nan"
      printf "\n"
    }
  }' "$dir/decomposition.csv" "$dir/ablation.csv" "$dir/decomposition-samples.csv" "$dir/ablation-samples.csv" \
  > "$fig/$name.dat"
n=$(grep -vc '^#' "$fig/$name.dat")
h=$(awk -v n="$n" 'BEGIN { printf "%.2f", 1.7 + 0.17 * n }')
# x tick steps of a panel from its columns (a list): about 5 ticks over the data and 0, a step of 1, 2
# or 5 times a power of 10
step() { awk -v cols="$1" '!/^#/ { sub(/"[^"]*"/, "label"); n = split(cols, c, ",")
    for (i = 1; i <= n; i++) if ($c[i] == $c[i] + 0) { if ($c[i] < lo) lo = $c[i]; if ($c[i] > hi) hi = $c[i] } }
  END { r = (hi - lo) / 5; p = 10 ^ int(log(r) / log(10) - (r < 1)); s = r / p
        printf "%g", (s <= 1 ? 1 : s <= 2 ? 2 : s <= 5 ? 5 : 10) * p }' "$fig/$name.dat"; }
{
  echo "# $name.gp: per-sample sources (ladder) and Shapley shares (factorial) at density_target $rho"
  echo "# made by experiments/samples_fig.sh; re-render inside this directory: gnuplot $name.gp"
  echo "load 'style.gp'"
  echo "do for [fmt in \"pdf png\"] {"
  echo "if (fmt eq \"pdf\") { set terminal pdfcairo size 7in,${h}in font 'Liberation Sans,8' } else { set terminal pngcairo size 2100,$(awk -v h="$h" 'BEGIN { printf "%d", h * 300 }') font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
  echo "set output '$name.'.fmt"
  echo "set multiplot title \"per sample at target density {/:Italic ρ} = $rho${computed:+ (computed $computed)}: each sample alone; top row: all samples pooled with the two-level 95% interval\""
  echo "set tmargin at screen $(awk -v h="$h" 'BEGIN { printf "%.3f", 1 - 0.55 / h }'); set bmargin at screen $(awk -v h="$h" 'BEGIN { printf "%.3f", 0.75 / h }')"
  echo "set yrange [$n - 0.5:-0.5]"
  echo "set grid xtics noytics"
  echo "set arrow from 0, graph 0 to 0, graph 1 nohead lc rgb '#000000' lw 1"
  echo "f = '$name.dat'"
  echo "set ytics nomirror font ',7' noenhanced ()"
  echo "set xtics nomirror $(step 3,4,5,9,10,11,12,13,14)"
  echo "set lmargin at screen 0.16; set rmargin at screen 0.55"
  echo "set title '(a) sources of the gap (oracle ladder)'"
  echo "set key at screen 0.355, screen 0.01 center bottom horizontal noenhanced font ',7' samplen 1"
  echo "set xlabel 'relative L_2 error'"
  echo "plot f using 3:(\$1-0.2):9:10:ytic(stringcolumn(2)) with xerrorbars ls 1 pt 7 ps 0.7 title 'selection', \\"
  echo "  f using 4:1:11:12 with xerrorbars ls 2 pt 5 ps 0.7 title 'grouping', \\"
  echo "  f using 5:(\$1+0.2):13:14 with xerrorbars ls 3 pt 9 ps 0.7 title 'lost contributions'"
  echo "unset ytics"
  echo "set xtics nomirror $(step 6,7,8,15,16,17,18,19,20)"
  echo "set lmargin at screen 0.60; set rmargin at screen 0.98"
  echo "set title '(b) Shapley shares (factorial; positive = error reduced)'"
  echo "set key at screen 0.79, screen 0.01 center bottom horizontal noenhanced font ',7' samplen 1"
  echo "set xlabel 'error reduction'"
  echo "plot f using 6:(\$1-0.2):15:16 with xerrorbars ls 4 pt 7 ps 0.7 title 'φ_G grouping', \\"
  echo "  f using 7:1:17:18 with xerrorbars ls 5 pt 5 ps 0.7 title 'φ_S selection', \\"
  echo "  f using 8:(\$1+0.2):19:20 with xerrorbars ls 6 pt 9 ps 0.7 title 'φ_R residual'"
  echo "unset multiplot"
  echo "unset output"
  echo "}"
} > "$fig/$name.gp"
[ -e "$fig/style.gp" ] || cp "$here/../analysis/style.gp" "$fig/"
(cd "$fig" && gnuplot "$name.gp")
echo "samples_fig.sh: $fig/$name.{png,pdf}" >&2
