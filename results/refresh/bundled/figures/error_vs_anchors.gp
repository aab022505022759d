# error_vs_anchors.gp: mean error vs number of anchors (12 reuse steps), the bundled model: one sample, cockatoo seed 1
# made by experiments/refresh.sh; re-render inside this directory: gnuplot error_vs_anchors.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 3.4in,2.4in font 'Liberation Sans,8' } else { set terminal pngcairo size 1020,720 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'error_vs_anchors.'.fmt
set title 'error vs number of anchors ({/:Italic ρ} = 0.15, the bundled model: one sample, cockatoo seed 1)'
set xlabel 'anchors over 12 steps'
set ylabel 'relative L_2 error (mean)'
set logscale y
set xtics (1, 2, 3, 6)
set xrange [0.7:6.3]
set key outside right top font ',7'
plot 'error_vs_anchors.dat' index 0 using 1:2 with linespoints ls 1 title 'baseline', \
  'error_vs_anchors.dat' index 1 using 1:2 with linespoints ls 2 title 'mc-gs', \
  'error_vs_anchors.dat' index 2 using 1:2 with linespoints ls 3 title 'mc-residual', \
  'error_vs_anchors.dat' index 3 using 1:2 with linespoints ls 4 title 'mc-sparse'
unset output
}
