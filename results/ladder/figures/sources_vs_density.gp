# sources_vs_density.gp: the three sources of the gap vs target density (all layers, then per layer)
# made by experiments/ladder_fig.sh from decomposition.csv; synthetic trace
# re-render inside this directory: gnuplot sources_vs_density.gp
do for [fmt in "pdf png"] {
reset; load 'style.gp' # each terminal from the same settings (the key's plot unsets the axes)
if (fmt eq "pdf") { set terminal pdfcairo size 9.0in,2.8in font 'Liberation Sans,8' } else { set terminal pngcairo size 2700,840 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'sources_vs_density.'.fmt
set multiplot layout 1,4 title 'sources of the dense-sparse gap vs density (oracle ladder, synthetic trace; negative sources below 0)'
set tmargin at screen 0.74; set bmargin at screen 0.22
set style fill solid 0.85 noborder
set xlabel 'target density {/:Italic ρ} (computed below it)' offset 0,-0.4
set ylabel 'relative L_2 error (mean)'
set yrange [-0.0281:1.41]
set xzeroaxis lt -1 lw 0.5
set xtics rotate by 0
unset key
set title 'all layers'
f = 'sources_vs_density.dat'
plot f index 0 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(strcol(1)."\n(".sprintf("%.3g", $11).")") with boxxyerror ls ls_lost notitle, \
  f index 0 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls ls_grouping notitle, \
  f index 0 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls ls_selection notitle, \
  f index 0 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset ylabel
set title 'layer 0'
f = 'sources_vs_density.dat'
plot f index 1 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(strcol(1)."\n(".sprintf("%.3g", $11).")") with boxxyerror ls ls_lost notitle, \
  f index 1 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls ls_grouping notitle, \
  f index 1 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls ls_selection notitle, \
  f index 1 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset ylabel
set title 'layer 1'
f = 'sources_vs_density.dat'
plot f index 2 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(strcol(1)."\n(".sprintf("%.3g", $11).")") with boxxyerror ls ls_lost notitle, \
  f index 2 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls ls_grouping notitle, \
  f index 2 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls ls_selection notitle, \
  f index 2 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset ylabel
set title 'layer 2'
f = 'sources_vs_density.dat'
plot f index 3 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(strcol(1)."\n(".sprintf("%.3g", $11).")") with boxxyerror ls ls_lost notitle, \
  f index 3 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls ls_grouping notitle, \
  f index 3 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls ls_selection notitle, \
  f index 3 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
set lmargin at screen 0.02; set rmargin at screen 0.98; set tmargin at screen 0.9; set bmargin at screen 0.87
unset border; unset tics; unset xlabel; unset ylabel; unset title; unset xzeroaxis; unset grid; set xrange [0:1]; set yrange [0:1]
set key at screen 0.5, screen 0.885 center center horizontal maxrows 1 samplen 1.5 width 1 font ',7'
plot NaN with boxes ls ls_lost title 'lost contributions', NaN with boxes ls ls_grouping title 'grouping', NaN with boxes ls ls_selection title 'selection', \
  NaN with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block) = the sum'
unset multiplot
unset output
}
