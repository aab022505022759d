#!/usr/bin/env bash
# ladder_fig.sh DIR: the figure DIR/figures/sources_vs_density.{dat,gp,png,pdf} from
# DIR/decomposition.csv (dsgap decompose's oracle ladder): the three sources of the dense-sparse gap
# at every density as diverging stacks (positive sources up from 0, negative ones down from 0), E
# with its 95% interval, one panel for all layers and one per layer; under each target density its
# computed density (that row's, est-block's), the key outside the panels. The shared style
# (style.gp). experiments/ladder.sh calls it; it also re-renders committed results:
#   experiments/ladder_fig.sh results/ladder
# shellcheck shell=bash
set -euo pipefail
[ $# -eq 1 ] && [ -s "$1/decomposition.csv" ] || { echo "usage: ladder_fig.sh DIR (with DIR/decomposition.csv)" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
csv=$1/decomposition.csv fig=$1/figures
head -1 "$csv" | grep -q '^density_target,layer,quantity,estimate,lo,hi,.*,density' ||
  { echo "ladder_fig.sh: $csv is not dsgap decompose's decomposition.csv" >&2; exit 2; }
mkdir -p "$fig"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  { key = $1 SUBSEP $2; v[key, $3] = $4; lo[key, $3] = $5; hi[key, $3] = $6
    if ($3 == "E(est-block)") rho[key] = $c["density"]
    if (!(key in seen)) { seen[key] = 1; order[n++] = key } }
  function bar(x) { if (x >= 0) { printf " %.6g %.6g", up, up + x; up += x } else { printf " %.6g %.6g", down + x, down; down += x } }
  END {
    print "# sources_vs_density.dat: sources of the dense-sparse gap vs target density (from decomposition.csv)"
    print "# one block per panel (index 0: all layers, then each layer); each source a bar from .._lo to .._hi,"
    print "# stacked up from 0 when positive and down from 0 when negative; E: E(est-block), lo hi: its 95% interval;"
    print "# computed: the computed density of the row (est-block, past the warm-up)"
    print "# columns: density lost_lo lost_hi grouping_lo grouping_hi selection_lo selection_hi E lo hi computed"
    nb = 0
    split("", panels)
    for (i = 0; i < n; i++) { split(order[i], k, SUBSEP); if (!(k[2] in pseen)) { pseen[k[2]] = 1; panels[nb++] = k[2] } }
    for (b = 0; b < nb; b++) {
      printf "# panel %s\n", panels[b]
      for (i = 0; i < n; i++) {
        split(order[i], k, SUBSEP)
        if (k[2] != panels[b]) continue
        key = order[i]
        up = down = 0
        printf "%s", k[1]
        bar(v[key, "lost"]); bar(v[key, "grouping"]); bar(v[key, "selection"])
        printf " %.6g %.6g %.6g %.6g\n", v[key, "E(est-block)"], lo[key, "E(est-block)"], hi[key, "E(est-block)"], rho[key]
      }
      printf "\n\n"
    }
  }' "$csv" > "$fig/sources_vs_density.dat"
layers=$(awk -F, 'NR > 1 && $2 != "all" { print $2 }' "$csv" | sort -un | tr '\n' ' ')
npanel=$(( $(echo $layers | wc -w) + 1 ))
yrange=$(awk '!/^#/ && NF >= 10 { for (c = 2; c <= 10; c++) { if ($c > hi) hi = $c; if ($c < lo) lo = $c } }
  END { printf "%.3g:%.3g", lo < 0 ? lo * 1.3 : 0, hi * 1.08 }' "$fig/sources_vs_density.dat")
# the trace's source (synthetic, model) from run.json, for the title
source=$([ ! -s "$1/run.json" ] || sed -n 's/^[[:space:]]*"source":[[:space:]]*"\(.*\)",*$/\1/p' "$1/run.json" | head -1)
{
  echo "# sources_vs_density.gp: the three sources of the gap vs target density (all layers, then per layer)"
  echo "# made by experiments/ladder_fig.sh from decomposition.csv${source:+; $source trace}"
  echo "# re-render inside this directory: gnuplot sources_vs_density.gp"
  echo "do for [fmt in \"pdf png\"] {"
  echo "reset; load 'style.gp' # each terminal from the same settings (the key's plot unsets the axes)"
  echo "if (fmt eq \"pdf\") { set terminal pdfcairo size $((npanel * 2 + 1)).0in,2.8in font 'Liberation Sans,8' } else { set terminal pngcairo size $((npanel * 600 + 300)),840 font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
  echo "set output 'sources_vs_density.'.fmt"
  echo "set multiplot layout 1,$npanel title 'sources of the dense-sparse gap vs density (oracle ladder${source:+, $source trace}; negative sources below 0)'"
  echo "set tmargin at screen 0.74; set bmargin at screen 0.22"
  echo "set style fill solid 0.85 noborder"
  echo "set xlabel 'target density {/:Italic ρ} (computed below it)' offset 0,-0.4"
  echo "set ylabel 'relative L_2 error (mean)'"
  echo "set yrange [$yrange]"
  echo "set xzeroaxis lt -1 lw 0.5"
  echo "set xtics rotate by 0"
  echo "unset key"
  i=0
  for p in all $layers; do
    [ $i -gt 0 ] && echo "unset ylabel"
    title="layer $p"; [ $p = all ] && title="all layers"
    echo "set title '$title'"
    echo "f = 'sources_vs_density.dat'"
    echo "plot f index $i using 0:((\$2+\$3)/2):(\$0-0.4):(\$0+0.4):2:3:xtic(strcol(1).\"\\n(\".sprintf(\"%.3g\", \$11).\")\") with boxxyerror ls ls_lost notitle, \\"
    echo "  f index $i using 0:((\$4+\$5)/2):(\$0-0.4):(\$0+0.4):4:5 with boxxyerror ls ls_grouping notitle, \\"
    echo "  f index $i using 0:((\$6+\$7)/2):(\$0-0.4):(\$0+0.4):6:7 with boxxyerror ls ls_selection notitle, \\"
    echo "  f index $i using 0:9:(0):(\$10-\$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle"
    i=$((i + 1))
  done
  # the key: one row across the figure, between its title and the panels' (a plot of nothing)
  echo "set lmargin at screen 0.02; set rmargin at screen 0.98; set tmargin at screen 0.9; set bmargin at screen 0.87"
  echo "unset border; unset tics; unset xlabel; unset ylabel; unset title; unset xzeroaxis; unset grid; set xrange [0:1]; set yrange [0:1]"
  echo "set key at screen 0.5, screen 0.885 center center horizontal maxrows 1 samplen 1.5 width 1 font ',7'"
  echo "plot NaN with boxes ls ls_lost title 'lost contributions', NaN with boxes ls ls_grouping title 'grouping', NaN with boxes ls ls_selection title 'selection', \\"
  echo "  NaN with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block) = the sum'"
  echo "unset multiplot"
  echo "unset output"
  echo "}"
} > "$fig/sources_vs_density.gp"
cp "$here/../analysis/style.gp" "$fig/" # the current style (its source colours)
(cd "$fig" && gnuplot sources_vs_density.gp)
