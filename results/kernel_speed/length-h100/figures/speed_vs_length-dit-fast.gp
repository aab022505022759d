# speed_vs_length-dit-fast.gp: speedup over cuDNN dense against sequence length (experiments/kernel_speed_length.sh)
# re-render inside this directory: gnuplot speed_vs_length-dit-fast.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 12.44in,3.18in font 'Liberation Sans,8' } else { set terminal pngcairo size 4230,1080 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'speed_vs_length-dit-fast.'.fmt
set multiplot title 'one attention call, metadata amortised: path dit, P·V fast, against cuDNN dense (NVIDIA H100 80GB HBM3, 2026-12-06)' noenhanced
set logscale xy
set xrange [768:174762]
set xtics ('1k' 1024, '2k' 2048, '4k' 4096, '8k' 8192, '16k' 16384, '32k' 32768, '64k' 65536, '128k' 131072)
set yrange [0.002:10]
set xlabel 'tokens N'
set tmargin at screen 0.84; set bmargin at screen 0.17
set key off
set lmargin at screen 0.0544; set rmargin at screen 0.2955
set title '12 heads'
set ylabel 'cuDNN dense time / policy time'; set format y '%g'
plot 1 with lines lc rgb '#000000' lw 1 dt 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 0 using 1:($5 == 1 ? NaN : $2) with linespoints ls 1 notitle, \
  'speed_vs_length-dit-fast.dat' index 0 using 1:($5 == 1 ? $2 : NaN) with points ls 1 notitle, \
  'speed_vs_length-dit-fast.dat' index 1 using 1:($5 == 1 ? NaN : $2) with linespoints ls 9 notitle, \
  'speed_vs_length-dit-fast.dat' index 1 using 1:($5 == 1 ? $2 : NaN) with points ls 9 notitle, \
  'speed_vs_length-dit-fast.dat' index 2 using 1:($5 == 1 ? NaN : $2) with linespoints ls 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 2 using 1:($5 == 1 ? $2 : NaN) with points ls 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 3 using 1:($5 == 1 ? NaN : $2) with linespoints ls 3 notitle, \
  'speed_vs_length-dit-fast.dat' index 3 using 1:($5 == 1 ? $2 : NaN) with points ls 3 notitle, \
  'speed_vs_length-dit-fast.dat' index 4 using 1:($5 == 1 ? NaN : $2) with linespoints ls 4 notitle, \
  'speed_vs_length-dit-fast.dat' index 4 using 1:($5 == 1 ? $2 : NaN) with points ls 4 notitle, \
  'speed_vs_length-dit-fast.dat' index 5 using 1:($5 == 1 ? NaN : $2) with linespoints ls 5 notitle, \
  'speed_vs_length-dit-fast.dat' index 5 using 1:($5 == 1 ? $2 : NaN) with points ls 5 notitle, \
  'speed_vs_length-dit-fast.dat' index 6 using 1:($5 == 1 ? NaN : $2) with linespoints ls 6 notitle, \
  'speed_vs_length-dit-fast.dat' index 6 using 1:($5 == 1 ? $2 : NaN) with points ls 6 notitle, \
  'speed_vs_length-dit-fast.dat' index 7 using 1:($5 == 1 ? NaN : $2) with linespoints ls 10 notitle, \
  'speed_vs_length-dit-fast.dat' index 7 using 1:($5 == 1 ? $2 : NaN) with points ls 10 notitle, \
  'speed_vs_length-dit-fast.dat' index 24 using 1:2 with points pt 6 ps 2.2 lc rgb '#000000' notitle
set lmargin at screen 0.3144; set rmargin at screen 0.5556
set title '24 heads'
unset ylabel; set format y ''
plot 1 with lines lc rgb '#000000' lw 1 dt 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 8 using 1:($5 == 1 ? NaN : $2) with linespoints ls 1 notitle, \
  'speed_vs_length-dit-fast.dat' index 8 using 1:($5 == 1 ? $2 : NaN) with points ls 1 notitle, \
  'speed_vs_length-dit-fast.dat' index 9 using 1:($5 == 1 ? NaN : $2) with linespoints ls 9 notitle, \
  'speed_vs_length-dit-fast.dat' index 9 using 1:($5 == 1 ? $2 : NaN) with points ls 9 notitle, \
  'speed_vs_length-dit-fast.dat' index 10 using 1:($5 == 1 ? NaN : $2) with linespoints ls 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 10 using 1:($5 == 1 ? $2 : NaN) with points ls 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 11 using 1:($5 == 1 ? NaN : $2) with linespoints ls 3 notitle, \
  'speed_vs_length-dit-fast.dat' index 11 using 1:($5 == 1 ? $2 : NaN) with points ls 3 notitle, \
  'speed_vs_length-dit-fast.dat' index 12 using 1:($5 == 1 ? NaN : $2) with linespoints ls 4 notitle, \
  'speed_vs_length-dit-fast.dat' index 12 using 1:($5 == 1 ? $2 : NaN) with points ls 4 notitle, \
  'speed_vs_length-dit-fast.dat' index 13 using 1:($5 == 1 ? NaN : $2) with linespoints ls 5 notitle, \
  'speed_vs_length-dit-fast.dat' index 13 using 1:($5 == 1 ? $2 : NaN) with points ls 5 notitle, \
  'speed_vs_length-dit-fast.dat' index 14 using 1:($5 == 1 ? NaN : $2) with linespoints ls 6 notitle, \
  'speed_vs_length-dit-fast.dat' index 14 using 1:($5 == 1 ? $2 : NaN) with points ls 6 notitle, \
  'speed_vs_length-dit-fast.dat' index 15 using 1:($5 == 1 ? NaN : $2) with linespoints ls 10 notitle, \
  'speed_vs_length-dit-fast.dat' index 15 using 1:($5 == 1 ? $2 : NaN) with points ls 10 notitle, \
  'speed_vs_length-dit-fast.dat' index 25 using 1:2 with points pt 6 ps 2.2 lc rgb '#000000' notitle
set lmargin at screen 0.5745; set rmargin at screen 0.8156
set title '40 heads'
unset ylabel; set format y ''
set key at screen 0.8251, graph 0.5 left center vertical Left reverse noenhanced font ',7' samplen 2 spacing 1.0
plot 1 with lines lc rgb '#000000' lw 1 dt 2 title 'cuDNN dense = 1', \
  'speed_vs_length-dit-fast.dat' index 16 using 1:($5 == 1 ? NaN : $2) with linespoints ls 1 notitle, \
  'speed_vs_length-dit-fast.dat' index 16 using 1:($5 == 1 ? $2 : NaN) with points ls 1 notitle, \
  NaN with linespoints ls 1 title 'chipmunk, ρ 0.15', \
  'speed_vs_length-dit-fast.dat' index 17 using 1:($5 == 1 ? NaN : $2) with linespoints ls 9 notitle, \
  'speed_vs_length-dit-fast.dat' index 17 using 1:($5 == 1 ? $2 : NaN) with points ls 9 notitle, \
  NaN with linespoints ls 9 title 'our dense kernel', \
  'speed_vs_length-dit-fast.dat' index 18 using 1:($5 == 1 ? NaN : $2) with linespoints ls 2 notitle, \
  'speed_vs_length-dit-fast.dat' index 18 using 1:($5 == 1 ? $2 : NaN) with points ls 2 notitle, \
  NaN with linespoints ls 2 title 'ditfastattn (matched), ρ 0.15', \
  'speed_vs_length-dit-fast.dat' index 19 using 1:($5 == 1 ? NaN : $2) with linespoints ls 3 notitle, \
  'speed_vs_length-dit-fast.dat' index 19 using 1:($5 == 1 ? $2 : NaN) with points ls 3 notitle, \
  NaN with linespoints ls 3 title 'est-block, ρ 0.15', \
  'speed_vs_length-dit-fast.dat' index 20 using 1:($5 == 1 ? NaN : $2) with linespoints ls 4 notitle, \
  'speed_vs_length-dit-fast.dat' index 20 using 1:($5 == 1 ? $2 : NaN) with points ls 4 notitle, \
  NaN with linespoints ls 4 title 'mc-sparse, ρ 0.15', \
  'speed_vs_length-dit-fast.dat' index 21 using 1:($5 == 1 ? NaN : $2) with linespoints ls 5 notitle, \
  'speed_vs_length-dit-fast.dat' index 21 using 1:($5 == 1 ? $2 : NaN) with points ls 5 notitle, \
  NaN with linespoints ls 5 title 'pisa, ρ 0.15', \
  'speed_vs_length-dit-fast.dat' index 22 using 1:($5 == 1 ? NaN : $2) with linespoints ls 6 notitle, \
  'speed_vs_length-dit-fast.dat' index 22 using 1:($5 == 1 ? $2 : NaN) with points ls 6 notitle, \
  NaN with linespoints ls 6 title 'sta (matched), ρ 0.15', \
  'speed_vs_length-dit-fast.dat' index 23 using 1:($5 == 1 ? NaN : $2) with linespoints ls 10 notitle, \
  'speed_vs_length-dit-fast.dat' index 23 using 1:($5 == 1 ? $2 : NaN) with points ls 10 notitle, \
  NaN with linespoints ls 10 title 'xattention (matched), ρ 0.15', \
  NaN with points pt 6 ps 2.2 lc rgb '#000000' title 'one call timed (reps 1), not joined', \
  NaN with dots lc rgb '#ffffff' title 'not drawn, off budget: radial, spargeattn, svg2'
unset multiplot
unset output
}
