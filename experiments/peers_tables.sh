#!/usr/bin/env bash
# peers_tables.sh METRICS.csv DEST [WARMUP] [TITLE]: the peers' tables and figure from a replay's
# metrics.csv (experiments/peers.sh calls it; it also re-renders committed results):
#   DEST/peers.{csv,md,tex}: per policy and effective configuration, over the post-warm-up units
#     (step >= WARMUP, default 2): the target densities it was run at (a method whose mask does not
#     follow the target gives the same units at every target: one row, its targets listed), the
#     effective density, E = mean rel_l2 with a 95% percentile cluster bootstrap interval ((layer,
#     head) clusters with replacement, 1000 replicates, awk's rand seeded with 1), cosine,
#     retained mass, units and clusters; numbers to 3 significant figures, never e-notation
#   DEST/figures/peers_error_vs_density.{dat,gp,png,pdf}: E against the effective density, error
#     bars, the shared style (style.gp), labels as written (noenhanced), the legend below the
#     data, and a symlog y axis (linear near 0, logarithmic above) so that E = 0 (dense) shows
#   A budget=matched row whose effective density is more than 0.02 from a target it lists cannot
#   reach it (docs/spec.md §3.6): "cannot reach ρ" instead of E in the tables, left out of the figure.
# shellcheck shell=bash
set -euo pipefail
metrics=$1 dest=$2 warmup=${3:-2} title=${4:-synthetic trace}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh" # EXP_AWK_SIG3: the tables' numbers to 3 significant figures
mkdir -p "$dest/figures"
awk -F, -v W="$warmup" '
function shellsort(a, n,   gap, i, j, t) { # ascending a[1..n] (mawk has no asort)
  for (gap = int(n / 2); gap > 0; gap = int(gap / 2))
    for (i = gap + 1; i <= n; i++) { t = a[i]; for (j = i; j > gap && a[j - gap] > t; j -= gap) a[j] = a[j - gap]; a[j] = t }
}
NR == 1 { next }
$4 >= W {
  k = $1 SUBSEP $2; c = $5 SUBSEP $6
  if (!(k in n)) { order[++nk] = k }
  n[k]++; dn[k] += $3; e[k] += $8; co[k] += $9; m[k] += $11
  if (!((k, c) in cs)) { cl[k, ++ncl[k]] = c }
  cs[k, c] += $8; cn[k, c]++
}
END {
  srand(1)
  B = 1000
  print "policy,density_targets,density,rel_l2,lo,hi,cosine,mass_mean,n_units,n_clusters" > "'"$dest"'/peers.csv.tmp"
  for (i = 1; i <= nk; i++) {
    k = order[i]; split(k, kk, SUBSEP); p = kk[1]; t = kk[2]
    E = e[k] / n[k]; D = dn[k] / n[k]
    # the same units as an earlier target of this policy: one row, the targets listed
    sig = p SUBSEP sprintf("%.9g %.9g", D, E)
    if (sig in first) { targets[first[sig]] = targets[first[sig]] ";" t; continue }
    first[sig] = k; rows[++nr] = k; targets[k] = t
    nc = ncl[k]
    for (b = 1; b <= B; b++) {
      s = 0; u = 0
      for (j = 1; j <= nc; j++) { c = cl[k, 1 + int(rand() * nc)]; s += cs[k, c]; u += cn[k, c] }
      rep[b] = s / u
    }
    shellsort(rep, B)
    lo[k] = rep[int(0.025 * (B - 1)) + 1]; hi[k] = rep[int(0.975 * (B - 1)) + 1]
    ncls[k] = nc
  }
  for (r = 1; r <= nr; r++) {
    k = rows[r]; split(k, kk, SUBSEP)
    printf "%s,%s,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%d,%d\n", kk[1], targets[k], dn[k] / n[k], e[k] / n[k],
      lo[k], hi[k], co[k] / n[k], m[k] / n[k], n[k], ncls[k] > "'"$dest"'/peers.csv.tmp"
  }
}' "$metrics"
mv "$dest/peers.csv.tmp" "$dest/peers.csv"
csv=$dest/peers.csv
unreach='function unreached(p, t, d,   ts, i, n) { if (p !~ /budget=matched/) return 0
  n = split(t, ts, ";"); for (i = 1; i <= n; i++) if (d - ts[i] > 0.02 || ts[i] - d > 0.02) return 1; return 0 }'
fmt=$unreach$EXP_AWK_SIG3
{
  echo "Peers beside MC-Sparse on the $title (post-warm-up units, step ≥ $warmup; E = mean rel_l2 with a 95% percentile bootstrap interval over (layer, head) clusters, 1000 replicates). A method whose mask ignores the target density gives the same units at every target: one row, its targets listed. 3 significant figures."
  echo
  echo "| policy | target ρ | effective density | E (rel_l2) | 95% CI | cosine | retained mass | n | clusters |"
  echo "|:--|:--|--:|--:|:-:|--:|--:|--:|--:|"
  awk -F, "$fmt"'NR > 1 { t = $2; gsub(/;/, ", ", t)
    if (unreached($1, $2, $3)) { printf "| `%s` | %s | %s | cannot reach ρ | — | — | — | %d | %d |\n", $1, t, sig3($3), $9, $10; next }
    printf "| `%s` | %s | %s | %s | [%s, %s] | %s | %s | %d | %d |\n", $1, t, sig3($3), sig3($4), sig3($5), sig3($6), sig3($7), sig3($8), $9, $10 }' "$csv"
} > "$dest/peers.md"
{
  echo "% peers.tex: made by experiments/peers_tables.sh from $(basename "$metrics"). Needs \\usepackage{booktabs}."
  echo "\\begin{table*}[t]" # the page of a two-column paper, the interval under E (issue 49)
  echo "\\centering"
  echo "\\small"
  echo "\\caption{Peers beside MC-Sparse on the $title: mean relative \$L_2\$ error \$E\$ over post-warm-up units (step \$\\geq $warmup\$) with 95\\% percentile bootstrap intervals over (layer, head) clusters (1000 replicates) under it, at the effective density each method ran at; \$n\$: units, \$c\$: clusters. A method whose mask ignores the target density is listed once with its targets.}"
  echo "\\label{tab:peers}"
  echo "\\begin{tabular}{llrrrrrr}"
  echo "\\toprule"
  echo "Policy & Targets & Density & \$E\$ & Cosine & Mass & \$n\$ & \$c\$ \\\\"
  echo "\\midrule"
  awk -F, "$fmt"'NR > 1 { p = $1; gsub(/_/, "\\_", p); t = $2; gsub(/;/, ", ", t)
    if (unreached($1, $2, $3)) { printf "\\texttt{%s} & %s & $%s$ & \\multicolumn{3}{l}{cannot reach $\\rho$} & %d & %d \\\\\n", p, t, sig3($3), $9, $10; next }
    printf "\\texttt{%s} & %s & $%s$ & \\begin{tabular}[t]{@{}r@{}}$%s$\\\\{\\scriptsize$[%s, %s]$}\\end{tabular} & $%s$ & $%s$ & %d & %d \\\\\n", p, t, sig3($3), sig3($4), sig3($5), sig3($6), sig3($7), sig3($8), $9, $10 }' "$csv"
  echo "\\bottomrule"
  echo "\\end{tabular}"
  echo "\\end{table*}"
} > "$dest/peers.tex"

# figure: one block per policy (in the csv's order), rows sorted by effective density
fig=$dest/figures
policies=$(awk -F, "$unreach"'NR > 1 && !unreached($1, $2, $3) && !seen[$1]++ { print $1 }' "$csv")
{
  echo "# peers_error_vs_density.dat: from peers.csv; one block per policy"
  echo "# columns: density E lo hi"
  for p in $policies; do
    echo "# policy $p"
    awk -F, -v p="$p" "$unreach"'NR > 1 && $1 == p && !unreached($1, $2, $3) { print $3, $4, $5, $6 }' "$csv" | sort -g
    printf '\n\n'
  done
} > "$fig/peers_error_vs_density.dat"
np=$(echo "$policies" | wc -w)
rows=$(( (np + 4) / 4 ))
{
  echo "# peers_error_vs_density.gp: E against the effective density per policy (experiments/peers_tables.sh)"
  echo "# re-render inside this directory: gnuplot peers_error_vs_density.gp"
  echo "load 'style.gp'"
  echo "do for [fmt in \"pdf png\"] {"
  echo "if (fmt eq \"pdf\") { set terminal pdfcairo size 6.5in,4.2in font 'Liberation Sans,8' } else { set terminal pngcairo size 1950,1260 font 'Liberation Sans,8' fontscale 3 linewidth 2 }"
  echo "set output 'peers_error_vs_density.'.fmt"
  echo "set title 'peers beside MC-Sparse ($title): error against the effective density' noenhanced"
  echo "set xlabel 'effective (computed) density'"
  echo "set ylabel 'E = mean rel_l2 (symlog axis: linear below 0.01)' noenhanced"
  echo "c = 0.01"
  echo "set nonlinear y via asinh(y/c) inverse c*sinh(y)"
  echo "set yrange [0:*]"
  echo "set ytics ('0' 0, '0.01' 0.01, '0.03' 0.03, '0.1' 0.1, '0.3' 0.3, '1' 1)"
  echo "set xrange [0:1.05]"
  echo "set bmargin $((rows * 3 / 2 + 6))"
  echo "set key at screen 0.5, screen 0.01 center bottom horizontal maxrows $rows Left reverse noenhanced font ',7' samplen 2 width 1"
  printf "plot "
  # dense is the E = 0 marker, not a line: the other methods take the style's 15 line styles in turn
  # (more than 15 would repeat a colour: said on stderr)
  i=0 k=0
  for p in $policies; do
    if [ "$p" != dense ]; then
      [ $k -gt 0 ] && printf ", \\\\\n  "
      printf "'peers_error_vs_density.dat' index %d using 1:2:3:4 with yerrorlines ls %d title '%s'" $i $((k % 15 + 1)) "$p"
      k=$((k + 1))
    fi
    i=$((i + 1))
  done
  [ $k -le 15 ] || echo "peers_tables.sh: $k methods in the figure, 15 colours: some repeat" >&2
  printf ", \\\\\n  'peers_error_vs_density.dat' using 1:(\$2 == 0 ? 0 : NaN) with points pt 6 ps 3 lc rgb '#000000' title 'E = 0: dense, or exact (dense output)'\n"
  echo "unset output"
  echo "}"
} > "$fig/peers_error_vs_density.gp"
[ -e "$fig/style.gp" ] || cp "$here/../analysis/style.gp" "$fig/"
(cd "$fig" && gnuplot peers_error_vs_density.gp)
