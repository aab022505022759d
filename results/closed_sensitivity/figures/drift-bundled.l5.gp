# drift-bundled.l5.gp: re-render inside this directory: gnuplot drift-bundled.l5.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 4.6in,3.4in font 'Liberation Sans,8' } else { set terminal pngcairo size 1380,1020 font 'Liberation Sans,8' fontscale 2.5 linewidth 2 }
set output 'drift-bundled.l5.'.fmt
set title 'where the loop drifts: run bundled.l5, 24 samples'."\n".'schedule warmup=10,sparse_layers=5; 95% bootstrap bands over the samples' noenhanced
set xlabel 'denoising step'
set ylabel 'rel-L2 of the latents vs dense (mean)'
set logscale y
set format y '10^{%L}'
set xtics 5
set xrange [0:49]
set key below noenhanced
plot 'drift-bundled.l5.dat' index 0 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 1 notitle, \
 'drift-bundled.l5.dat' index 0 using 1:2 with linespoints ls 1 ps 0.4 title 'mc-sparse @ 0.15', \
  'drift-bundled.l5.dat' index 1 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 2 notitle, \
 'drift-bundled.l5.dat' index 1 using 1:2 with linespoints ls 2 ps 0.4 title 'svg2/budget=matched @ 0.15'
unset output
}
