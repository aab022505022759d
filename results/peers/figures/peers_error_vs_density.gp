# peers_error_vs_density.gp: E against the effective density per policy (experiments/peers_tables.sh)
# re-render inside this directory: gnuplot peers_error_vs_density.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 6.5in,4.2in font 'Liberation Sans,8' } else { set terminal pngcairo size 1950,1260 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'peers_error_vs_density.'.fmt
set title 'peers beside MC-Sparse (synthetic trace): error against the effective density' noenhanced
set xlabel 'effective (computed) density'
set ylabel 'E = mean rel_l2 (symlog axis: linear below 0.01)' noenhanced
c = 0.01
set nonlinear y via asinh(y/c) inverse c*sinh(y)
set yrange [0:*]
set ytics ('0' 0, '0.01' 0.01, '0.03' 0.03, '0.1' 0.1, '0.3' 0.3, '1' 1)
set xrange [0:1.05]
set bmargin 13
set key at screen 0.5, screen 0.01 center bottom horizontal maxrows 5 Left reverse noenhanced font ',7' samplen 2 width 1
plot 'peers_error_vs_density.dat' index 1 using 1:2:3:4 with yerrorlines ls 1 title 'baseline', \
  'peers_error_vs_density.dat' index 2 using 1:2:3:4 with yerrorlines ls 2 title 'mc-sparse', \
  'peers_error_vs_density.dat' index 3 using 1:2:3:4 with yerrorlines ls 3 title 'svg2', \
  'peers_error_vs_density.dat' index 4 using 1:2:3:4 with yerrorlines ls 4 title 'spargeattn', \
  'peers_error_vs_density.dat' index 5 using 1:2:3:4 with yerrorlines ls 5 title 'xattention', \
  'peers_error_vs_density.dat' index 6 using 1:2:3:4 with yerrorlines ls 6 title 'radial', \
  'peers_error_vs_density.dat' index 7 using 1:2:3:4 with yerrorlines ls 7 title 'sta', \
  'peers_error_vs_density.dat' index 8 using 1:2:3:4 with yerrorlines ls 8 title 'ditfastattn', \
  'peers_error_vs_density.dat' index 9 using 1:2:3:4 with yerrorlines ls 9 title 'chipmunk', \
  'peers_error_vs_density.dat' index 10 using 1:2:3:4 with yerrorlines ls 10 title 'pisa', \
  'peers_error_vs_density.dat' index 11 using 1:2:3:4 with yerrorlines ls 11 title 'svg2/budget=matched', \
  'peers_error_vs_density.dat' index 12 using 1:2:3:4 with yerrorlines ls 12 title 'spargeattn/theta=-0.1/budget=matched', \
  'peers_error_vs_density.dat' index 13 using 1:2:3:4 with yerrorlines ls 13 title 'xattention/budget=matched', \
  'peers_error_vs_density.dat' index 14 using 1:2:3:4 with yerrorlines ls 14 title 'sta/budget=matched', \
  'peers_error_vs_density.dat' index 15 using 1:2:3:4 with yerrorlines ls 15 title 'ditfastattn/budget=matched', \
  'peers_error_vs_density.dat' using 1:($2 == 0 ? 0 : NaN) with points pt 6 ps 3 lc rgb '#000000' title 'E = 0: dense, or exact (dense output)'
unset output
}
