# sources_vs_density.gp: the three sources of the gap vs target density (all layers, then per layer)
# made by experiments/ladder.sh from decomposition.csv; synthetic trace
# re-render inside this directory: gnuplot sources_vs_density.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 9.0in,2.6in font 'Liberation Sans,8' } else { set terminal pngcairo size 2700,780 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'sources_vs_density.'.fmt
set multiplot layout 1,4 title 'sources of the dense-sparse gap vs density (oracle ladder, synthetic trace; negative sources below 0)'
set style fill solid 0.85 noborder
set xlabel 'target density {/:Italic ρ}'
set ylabel 'relative L_2 error (mean)'
set yrange [-0.0281:1.9]
set xzeroaxis lt -1 lw 0.5
set xtics rotate by 0
set key top right horizontal maxrows 2 samplen 1 font ',7'
set title 'all layers'
f = 'sources_vs_density.dat'
plot f index 0 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(1) with boxxyerror ls 3 title 'lost contributions', \
  f index 0 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls 2 title 'grouping', \
  f index 0 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls 1 title 'selection', \
  f index 0 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block)'
unset key
unset ylabel
set title 'layer 0'
f = 'sources_vs_density.dat'
plot f index 1 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(1) with boxxyerror ls 3 title 'lost contributions', \
  f index 1 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls 2 title 'grouping', \
  f index 1 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls 1 title 'selection', \
  f index 1 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block)'
unset key
unset ylabel
set title 'layer 1'
f = 'sources_vs_density.dat'
plot f index 2 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(1) with boxxyerror ls 3 title 'lost contributions', \
  f index 2 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls 2 title 'grouping', \
  f index 2 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls 1 title 'selection', \
  f index 2 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block)'
unset key
unset ylabel
set title 'layer 2'
f = 'sources_vs_density.dat'
plot f index 3 using 0:(($2+$3)/2):($0-0.4):($0+0.4):2:3:xtic(1) with boxxyerror ls 3 title 'lost contributions', \
  f index 3 using 0:(($4+$5)/2):($0-0.4):($0+0.4):4:5 with boxxyerror ls 2 title 'grouping', \
  f index 3 using 0:(($6+$7)/2):($0-0.4):($0+0.4):6:7 with boxxyerror ls 1 title 'selection', \
  f index 3 using 0:9:(0):($10-$9) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block)'
unset multiplot
unset output
}
