# speed_vs_length-backend-precise.gp: speedup over cuDNN dense against sequence length (experiments/kernel_speed_length.sh)
# re-render inside this directory: gnuplot speed_vs_length-backend-precise.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 5.97in,3.18in font 'Liberation Sans,8' } else { set terminal pngcairo size 2030,1080 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'speed_vs_length-backend-precise.'.fmt
set multiplot title 'one attention call, metadata amortised: path backend, P·V precise, against cuDNN dense (NVIDIA H200, 2026-12-05)' noenhanced
set logscale xy
set xrange [768:43680]
set xtics ('1k' 1024, '2k' 2048, '4k' 4096, '8k' 8192, '16k' 16384, '32k' 32768)
set yrange [0.005:10]
set xlabel 'tokens N'
set tmargin at screen 0.84; set bmargin at screen 0.17
set key off
set lmargin at screen 0.1133; set rmargin at screen 0.6158
set title '12 heads'
set ylabel 'cuDNN dense time / policy time'; set format y '%g'
set key at screen 0.6355, graph 0.5 left center vertical Left reverse noenhanced font ',7' samplen 2 spacing 1.0
plot 1 with lines lc rgb '#000000' lw 1 dt 2 title 'cuDNN dense = 1', \
  'speed_vs_length-backend-precise.dat' index 0 using 1:($5 == 1 ? NaN : $2) with linespoints ls 1 notitle, \
  'speed_vs_length-backend-precise.dat' index 0 using 1:($5 == 1 ? $2 : NaN) with points ls 1 notitle, \
  NaN with linespoints ls 1 title 'chipmunk, ρ 0.15', \
  'speed_vs_length-backend-precise.dat' index 1 using 1:($5 == 1 ? NaN : $2) with linespoints ls 9 notitle, \
  'speed_vs_length-backend-precise.dat' index 1 using 1:($5 == 1 ? $2 : NaN) with points ls 9 notitle, \
  NaN with linespoints ls 9 title 'our dense kernel', \
  'speed_vs_length-backend-precise.dat' index 2 using 1:($5 == 1 ? NaN : $2) with linespoints ls 2 notitle, \
  'speed_vs_length-backend-precise.dat' index 2 using 1:($5 == 1 ? $2 : NaN) with points ls 2 notitle, \
  NaN with linespoints ls 2 title 'ditfastattn (matched), ρ 0.15', \
  'speed_vs_length-backend-precise.dat' index 3 using 1:($5 == 1 ? NaN : $2) with linespoints ls 3 notitle, \
  'speed_vs_length-backend-precise.dat' index 3 using 1:($5 == 1 ? $2 : NaN) with points ls 3 notitle, \
  NaN with linespoints ls 3 title 'est-block, ρ 0.15', \
  'speed_vs_length-backend-precise.dat' index 4 using 1:($5 == 1 ? NaN : $2) with linespoints ls 4 notitle, \
  'speed_vs_length-backend-precise.dat' index 4 using 1:($5 == 1 ? $2 : NaN) with points ls 4 notitle, \
  NaN with linespoints ls 4 title 'mc-sparse, ρ 0.15', \
  'speed_vs_length-backend-precise.dat' index 5 using 1:($5 == 1 ? NaN : $2) with linespoints ls 5 notitle, \
  'speed_vs_length-backend-precise.dat' index 5 using 1:($5 == 1 ? $2 : NaN) with points ls 5 notitle, \
  NaN with linespoints ls 5 title 'pisa, ρ 0.15', \
  'speed_vs_length-backend-precise.dat' index 6 using 1:($5 == 1 ? NaN : $2) with linespoints ls 6 notitle, \
  'speed_vs_length-backend-precise.dat' index 6 using 1:($5 == 1 ? $2 : NaN) with points ls 6 notitle, \
  NaN with linespoints ls 6 title 'sta (matched), ρ 0.15', \
  'speed_vs_length-backend-precise.dat' index 7 using 1:($5 == 1 ? NaN : $2) with linespoints ls 10 notitle, \
  'speed_vs_length-backend-precise.dat' index 7 using 1:($5 == 1 ? $2 : NaN) with points ls 10 notitle, \
  NaN with linespoints ls 10 title 'xattention (matched), ρ 0.15', \
  NaN with dots lc rgb '#ffffff' title 'not drawn, off budget: radial, spargeattn, svg2'
unset multiplot
unset output
}
