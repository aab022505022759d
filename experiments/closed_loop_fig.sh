#!/usr/bin/env bash
# closed_loop_fig.sh FIGDIR TITLE STATS.csv [RUN [NAME [REF]]]: the closed-loop figure (issue 19) from
# the closed_loop.csv that experiments/closed_loop.sh writes (one row per run, method and target
# density: means over the samples and 95% bootstrap intervals over them, from dsgap compare):
#   FIGDIR/NAME.{dat,gp,png,pdf} (NAME default closed_loop): PSNR and SSIM of the final frames
#   against the dense run, one colour and marker per method (REF, default mc-sparse, drawn
#   thicker), points with their intervals at each target density (dodged sideways, each method
#   joined across the densities), the computed densities on the x axis beside the target, the
#   legend outside the panels. One rule for every method (REF too): a point whose computed density
#   (past the warm-up) is more than 0.02 from its target is drawn hollow with a double dagger and
#   named under the panels (dsgap compare calls a peer there "cannot reach"); a method that runs at
#   one computed density whatever the target is not drawn where that density is more than 0.02
#   from the target, nor a point with PSNR inf (the dense frames), both named under the panels. RUN: the run of STATS.csv to draw (default its first); TITLE: the second line
#   of the title (model, samples, where the cells come from). The shared style (style.gp).
# experiments/closed_loop.sh calls it; it also re-renders committed results:
#   experiments/closed_loop_fig.sh results/closed_loop/figures "TITLE" results/closed_loop/closed_loop.csv
# shellcheck shell=bash
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: closed_loop_fig.sh FIGDIR TITLE STATS.csv [RUN [NAME [REF]]]" >&2; exit 2; }
fig=$1 title=$2 stats=$3 run=${4:-} name=${5:-closed_loop} ref=${6:-mc-sparse}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
head -1 "$stats" | grep -q '^run,policy,.*sparse_density,reached,psnr,psnr_lo,psnr_hi,ssim,ssim_lo,ssim_hi' ||
  { echo "closed_loop_fig.sh: $stats is not closed_loop.sh's closed_loop.csv (run,policy,...,psnr_lo,psnr_hi,...)" >&2; exit 2; }
mkdir -p "$fig"
gq() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; } # a gnuplot "..." string
awk -F, -v run="$run" -v ref="$ref" -v name="$name" -v gtitle="$(gq "$title")" -v DAT="$fig/$name.dat" '
  FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  run == "" { run = $c["run"] }
  $c["run"] != run || $c["policy"] == "dense" { next }
  { p = $c["policy"]; t = $c["density_target"]
    if (!(p in pseen)) { pseen[p] = 1; pol[++np] = p }
    if (!(t in tseen)) { tseen[t] = 1; rho[++nt] = t }
    fin[p, t] = $c["psnr"] != "inf" && $c["psnr"] != "nan"
    sd[p, t] = $c["sparse_density"]
    line[p, t] = $c["psnr"] " " $c["psnr_lo"] " " $c["psnr_hi"] " " $c["ssim"] " " $c["ssim_lo"] " " $c["ssim_hi"] " " t " " $c["sparse_density"] }
  function wrap(s, item) { if (s == "") { ll = length(item); return item }
    if (ll + length(item) > 125) { ll = length(item); nl++; return s ";\\n" item }
    ll += length(item) + 2; return s "; " item }
  END {
    if (!np) { print "closed_loop_fig.sh: no rows of run " run > "/dev/stderr"; exit 2 }
    for (i = 2; i <= nt; i++) for (j = i; j > 1 && rho[j] + 0 < rho[j - 1] + 0; j--) { x = rho[j]; rho[j] = rho[j - 1]; rho[j - 1] = x }
    # the rule, the same for every method: drawn at a target where its PSNR is finite, filled when its
    # computed density is within 0.02 of the target, hollow with a double dagger when further off; a
    # method that runs at one computed density whatever the target (the same at every target) is not
    # drawn where that density is more than 0.02 from the target
    for (i = 1; i <= np; i++) { p = pol[i]; fixed[p] = nt > 1
      for (j = 2; j <= nt; j++) if (!((p, rho[j]) in sd) || sprintf("%.3f", sd[p, rho[j]]) != sprintf("%.3f", sd[p, rho[1]])) fixed[p] = 0
      for (j = 1; j <= nt; j++) { t = rho[j]; if (!((p, t) in sd)) continue
        d = sd[p, t] - t; far[p, t] = d > 0.02 || d < -0.02
        ok[p, t] = fin[p, t] && !(fixed[p] && far[p, t]) } }
    # the methods drawn (at least one density), REF first
    nm = 0
    for (i = 1; i <= np; i++) if (pol[i] == ref) for (j = 1; j <= nt; j++) if (ok[ref, rho[j]]) { m[++nm] = ref; break }
    for (i = 1; i <= np; i++) { p = pol[i]; if (p == ref) continue; for (j = 1; j <= nt; j++) if (ok[p, rho[j]]) { m[++nm] = p; break } }
    w = nm > 1 ? 0.8 / nm : 0; if (w > 0.09) w = 0.09
    print "# " name ".dat: made by experiments/closed_loop_fig.sh from closed_loop.csv (run " run "): one block (gnuplot index) per method" > DAT
    print "# columns: x psnr psnr_lo psnr_hi ssim ssim_lo ssim_hi density_target sparse_density off (x: the density'"'"'s slot, dodged; off 1: computed more than 0.02 from the target, drawn hollow); a blank line where the method is not drawn" > DAT
    for (k = 1; k <= nm; k++) { p = m[k]; print "# method " p > DAT
      for (j = 1; j <= nt; j++) { t = rho[j]
        if (!ok[p, t]) { print "" > DAT; continue }
        printf "%.4f %s %d\n", j - 1 + (k - (nm + 1) / 2) * w, line[p, t], far[p, t] > DAT }
      print "\n" > DAT }
    # x tics: the target and the range of computed densities drawn at it
    xt = ""
    for (j = 1; j <= nt; j++) { t = rho[j]; lo = 2; hi = -1
      for (k = 1; k <= nm; k++) if (ok[m[k], t]) { x = sd[m[k], t] + 0; lo = x < lo ? x : lo; hi = x > hi ? x : hi }
      d = hi < 0 ? "" : sprintf("%.3f", lo) == sprintf("%.3f", hi) ? sprintf("%.3f", lo) : sprintf("%.3f-%.3f", lo, hi)
      xt = xt (j > 1 ? ", " : "") sprintf("\"ρ %s\\n(%s)\" %d", t, d, j - 1) }
    # under the panels: the hollow points per target and computed density, then what is not drawn
    nl = 0; off = ""
    for (j = 1; j <= nt; j++) { t = rho[j]; split("", grp); ng = 0
      for (k = 1; k <= nm; k++) { p = m[k]; if (!ok[p, t] || !far[p, t]) continue
        g = sprintf("%.3f", sd[p, t]); if (!(g in grp)) { go[++ng] = g; grp[g] = p } else grp[g] = grp[g] ", " p }
      for (i = 1; i <= ng; i++) off = wrap(off, "ρ " t ": " grp[go[i]] " (computed " go[i] ")") }
    if (off != "") { off = "hollow markers with ‡: computed density (past the warm-up) more than 0.02 from the target, drawn at it all the same (a peer'"'"'s table row says cannot reach ρ):\\n" off; nl++ }
    un = ""; ll = 0
    for (i = 1; i <= np; i++) { p = pol[i]; s = ""; nd = 0; first = ""; same = 1
      for (j = 1; j <= nt; j++) { t = rho[j]; if (!((p, t) in sd) || ok[p, t]) continue
        nd++; s = s (s ? ", " : "") t; if (first == "") first = sd[p, t]; else if (sd[p, t] != first) same = 0 }
      if (!nd) continue
      if (fixed[p]) item = p " (computed " sprintf("%.3f", first) " at every ρ" (nd < nt ? ", not drawn at ρ " s : "") ")"
      else if (same) item = p " at ρ " s " (PSNR inf: the dense frames)"
      else { s = ""; for (j = 1; j <= nt; j++) { t = rho[j]; if ((p, t) in sd && !ok[p, t]) s = s (s ? ", " : "") t }; item = p " at ρ " s " (PSNR inf: the dense frames)" }
      un = wrap(un, item) }
    if (un != "") { un = "not drawn: one computed density whatever the target, more than 0.02 from it, or PSNR inf:\\n" un; nl++ }
    note = off (off != "" && un != "" ? "\\n" : "") un; if (off != "" && un != "") nl++
    nl += (note != "")
    # a long title line: one line per "; " part
    if (length(gtitle) > 110) gsub(/; /, "\\n", gtitle)
    ntl = split(gtitle, tl, "\\\\n")
    h = 3.3 + 0.13 * nl + 0.13 * ntl
    # the legend as wide as the longest name (about 0.0062 of the width a character at font 7)
    ml = 6; for (k = 1; k <= nm; k++) ml = length(m[k]) > ml ? length(m[k]) : ml
    kx = 0.985 - (0.045 + 0.0062 * ml); if (kx < 0.6) kx = 0.6
    pw = (kx - 0.015 - 0.07 - 0.08) / 2
    # styles: REF vermillion, the others the palette without yellow and pale sand; markers filled
    # (a hollow one is the same shape open: pt - 1)
    split("1 3 4 8 10 9 6 5 13 11 12 14 15 7", pal, " ")
    split("5 7 9 11 13 15", mk, " ")
    printf "# %s.gp: closed-loop PSNR and SSIM per method and target density, 95%% intervals over the samples\n", name
    printf "# made by experiments/closed_loop_fig.sh; re-render inside this directory: gnuplot %s.gp\n", name
    print "load '"'"'style.gp'"'"'"
    print "do for [fmt in \"pdf png\"] {"
    printf "if (fmt eq \"pdf\") { set terminal pdfcairo size 7in,%.2fin font '"'"'Liberation Sans,8'"'"' } else { set terminal pngcairo size 2100,%d font '"'"'Liberation Sans,8'"'"' fontscale 3 linewidth 2 }\n", h, h * 300
    printf "set output '"'"'%s.'"'"'.fmt\n", name
    printf "set multiplot title \"Closed loop: PSNR and SSIM of the final frames against the dense run, means over the samples with 95%% bootstrap intervals over them\\n%s\" noenhanced font '"'"',8'"'"'\n", gtitle
    printf "set tmargin at screen %.3f; set bmargin at screen %.3f\n", 1 - (0.38 + 0.13 * ntl) / h, (0.75 + 0.13 * nl) / h
    printf "set xrange [-0.5:%d.5]\nset xtics (%s) noenhanced font '"'"',7'"'"'\nset xlabel '"'"'target ρ (computed, past the warm-up)'"'"' noenhanced offset 0,-0.6\nset grid ytics noxtics\nset key off\n", nt - 1, xt
    printf "f = '"'"'%s.dat'"'"'\n", name
    for (panel = 1; panel <= 2; panel++) {
      if (panel == 1) printf "set lmargin at screen 0.07; set rmargin at screen %.3f\nset ylabel '"'"'PSNR against the dense run (dB)'"'"'\n", 0.07 + pw
      else printf "set lmargin at screen %.3f; set rmargin at screen %.3f\nset ylabel '"'"'SSIM against the dense run'"'"'\n%sset key at screen %.3f, screen %.3f left top Left reverse noenhanced font '"'"',7'"'"' samplen 1.5 spacing 1.15 title '"'"'method'"'"'\n", 0.15 + pw, kx - 0.015, note != "" ? sprintf("set label 1 \"%s\" at screen 0.01, screen %.3f left noenhanced font '"'"',6'"'"'\n", note, (0.06 + 0.13 * (nl - 1)) / h) : "", kx, 1 - (0.43 + 0.13 * ntl) / h
      col = panel == 1 ? 2 : 5
      printf "plot "
      for (k = 1; k <= nm; k++) { ls = m[k] == ref ? 2 : pal[(k - (m[1] == ref ? 2 : 1)) % 14 + 1]; pt = mk[(k - 1) % 6 + 1]
        lw = m[k] == ref ? 2 : 0.7; bw = m[k] == ref ? 1.6 : 0.8; ps = m[k] == ref ? 1.4 : 1.15
        printf "%sf index %d using 1:%d with lines ls %d lw %s notitle, \\\n  f index %d using 1:($10 > 0 ? NaN : $%d):%d:%d with yerrorbars ls %d lw %s pt %d ps %s title \"%s\", \\\n  f index %d using 1:($10 > 0 ? $%d : NaN):%d:%d with yerrorbars ls %d lw %s pt %d ps %s notitle, \\\n  f index %d using 1:($10 > 0 ? $%d : NaN):(\"‡\") with labels offset 0,0.55 center font '"'"',7'"'"' tc ls %d notitle", \
          (k > 1 ? ", \\\n  " : ""), k - 1, col, ls, lw, k - 1, col, col + 1, col + 2, ls, bw, pt, ps, m[k], k - 1, col, col + 1, col + 2, ls, bw, pt - 1, ps, k - 1, col + 2, ls }
      printf "\nset key off\n" }
    print "unset multiplot"
    print "unset output"
    print "}" }' "$stats" > "$fig/$name.gp"
[ -e "$fig/style.gp" ] || cp "$here/../analysis/style.gp" "$fig/"
(cd "$fig" && gnuplot "$name.gp")
