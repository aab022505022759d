#!/usr/bin/env bash
# closed_loop_fig.sh FIGDIR MODEL_LABEL RUN/closed_loop.csv...: the closed-loop figure from the
# per-sample rows (prompt x seed) of dsgap run's closed_loop.csv files (issue 19):
#   FIGDIR/closed_loop.{dat,gp,png,pdf}: per sparse policy and target density, the mean over the
#   samples of PSNR, SSIM (against the dense run of the same prompt and noise) and the transformer
#   speedup, with 95% percentile bootstrap intervals over the samples (1000 replicates, awk's rand
#   seeded with 1); a dot plot with one row per policy (its effective density in the label), so
#   that no legend covers the data; the shared style (style.gp).
# experiments/closed_loop.sh calls it; it also re-renders committed results.
# shellcheck shell=bash
set -euo pipefail
fig=$1 mlabel=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$fig"
awk -F, '
function shellsort(a, n,   gap, i, j, t) {
  for (gap = int(n / 2); gap > 0; gap = int(gap / 2))
    for (i = gap + 1; i <= n; i++) { t = a[i]; for (j = i; j > gap && a[j - gap] > t; j -= gap) a[j] = a[j - gap]; a[j] = t }
}
function boot(k, col,   b, s, j, i) { # the 2.5% and 97.5% quantiles of the mean of column col over k samples
  for (b = 1; b <= B; b++) { s = 0; for (j = 1; j <= ns[k]; j++) { i = 1 + int(rand() * ns[k]); s += v[k, col, i] }; rep[b] = s / ns[k] }
  shellsort(rep, B)
  return rep[int(0.025 * (B - 1)) + 1] " " rep[int(0.975 * (B - 1)) + 1]
}
FNR == 1 { next }
$3 != "dense" {
  k = $3 "@" $4
  if (!(k in ns)) order[++nk] = k
  i = ++ns[k]
  v[k, 1, i] = $6; v[k, 2, i] = $7; v[k, 3, i] = $12; dn[k] += $5
}
END {
  srand(1); B = 1000
  print "# closed_loop.dat: per sparse policy@target density: means over the samples and 95% bootstrap intervals over the samples"
  print "# columns: row label density samples psnr psnr_lo psnr_hi ssim ssim_lo ssim_hi speedup speedup_lo speedup_hi"
  for (r = 1; r <= nk; r++) {
    k = order[r]; n = ns[k]
    m1 = m2 = m3 = 0
    for (j = 1; j <= n; j++) { m1 += v[k, 1, j]; m2 += v[k, 2, j]; m3 += v[k, 3, j] }
    printf "%d \"%s\" %.4g %d %.6g %s %.6g %s %.6g %s\n", r - 1, k, dn[k] / n, n, m1 / n, boot(k, 1), m2 / n, boot(k, 2), m3 / n, boot(k, 3)
  }
}' "$@" > "$fig/closed_loop.dat"
n=$(grep -vc '^#' "$fig/closed_loop.dat")
ns=$(awk '!/^#/ { print $4; exit }' "$fig/closed_loop.dat")
h=$(awk -v n="$n" 'BEGIN { printf "%.2f", 0.9 + 0.16 * n }')
{
  echo "# closed_loop.gp: PSNR, SSIM and transformer speedup per policy, means over the samples with 95% intervals"
  echo "# made by experiments/closed_loop_fig.sh; re-render inside this directory: gnuplot closed_loop.gp"
  echo "load 'style.gp'"
  echo "do for [fmt in \"pdf png\"] {"
  echo "if (fmt eq \"pdf\") { set terminal pdfcairo size 7in,${h}in font 'Liberation Sans,8' } else { set terminal pngcairo size 2100,$(awk -v h="$h" 'BEGIN { printf "%d", h * 300 }') font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
  echo "set output 'closed_loop.'.fmt"
  echo "set multiplot title \"closed loop, model $mlabel, against the dense run of the same prompt and noise: means over $ns samples (prompt x seed)\\nwith 95% bootstrap intervals over the samples; rows: policy @ target density (computed density)\" noenhanced font ',8'"
  echo "set tmargin at screen $(awk -v h="$h" 'BEGIN { printf "%.3f", 1 - 0.42 / h }'); set bmargin at screen $(awk -v h="$h" 'BEGIN { printf "%.3f", 0.45 / h }')"
  echo "set yrange [$n - 0.5:-0.5]"
  echo "set key off"
  echo "set grid xtics noytics"
  echo "f = 'closed_loop.dat'"
  echo "set ytics () font ',7' noenhanced"
  echo "set lmargin at screen 0.34; set rmargin at screen 0.53"
  echo "set xlabel 'PSNR (dB)'"
  echo "set xtics autofreq"
  echo "set ytics () font ',7' noenhanced format '% h'"
  echo "plot f using 5:1:6:7:(int(\$1) % 15 + 1):ytic(sprintf('%s (%.3g)', stringcolumn(2), \$3)) with xerrorbars lc variable pt 7 ps 0.8"
  echo "set ytics format ''"
  echo "set lmargin at screen 0.56; set rmargin at screen 0.75"
  echo "set xlabel 'SSIM'"
  echo "set xtics 0.2"
  echo "plot f using 8:1:9:10:(int(\$1) % 15 + 1) with xerrorbars lc variable pt 7 ps 0.8"
  echo "set lmargin at screen 0.78; set rmargin at screen 0.97"
  echo "set xlabel 'transformer speedup over dense'"
  echo "set xtics 0.5"
  echo "plot f using 11:1:12:13:(int(\$1) % 15 + 1) with xerrorbars lc variable pt 7 ps 0.8"
  echo "unset multiplot"
  echo "unset output"
  echo "}"
} > "$fig/closed_loop.gp"
[ -e "$fig/style.gp" ] || cp "$here/../analysis/style.gp" "$fig/"
(cd "$fig" && gnuplot closed_loop.gp)
