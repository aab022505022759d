# error_vs_anchors-rho0.15.gp: re-render inside this directory: gnuplot error_vs_anchors-rho0.15.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 4.6in,2.6in font 'Liberation Sans,8' } else { set terminal pngcairo size 1380,780 font 'Liberation Sans,8' fontscale 2.5 linewidth 2 }
set output 'error_vs_anchors-rho0.15.'.fmt
set title "error vs number of anchors\n{/:Italic ρ} = 0.150 (computed 0.156 on the reuse steps); 24 samples, 95% two-level bootstrap intervals"
set xlabel 'anchors over the reuse steps'
set xtics (1, 2, 3, 6)
set xrange [0.5:6.5]
set ylabel 'relative L_2 error (mean)'
set yrange [0:*]
set key outside right top noenhanced
plot 'error_vs_anchors-rho0.15.dat' index 0 using ($1-0.090):2:3:4 with yerrorlines ls 1 title 'baseline', \
  'error_vs_anchors-rho0.15.dat' index 1 using ($1-0.030):2:3:4 with yerrorlines ls 2 title 'mc-residual', \
  'error_vs_anchors-rho0.15.dat' index 2 using ($1+0.030):2:3:4 with yerrorlines ls 3 title 'mc-gs', \
  'error_vs_anchors-rho0.15.dat' index 3 using ($1+0.090):2:3:4 with yerrorlines ls 4 title 'mc-sparse'
unset output
}
