# drift-bundled.a1.gp: re-render inside this directory: gnuplot drift-bundled.a1.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 4.6in,3.4in font 'Liberation Sans,8' } else { set terminal pngcairo size 1380,1020 font 'Liberation Sans,8' fontscale 2.5 linewidth 2 }
set output 'drift-bundled.a1.'.fmt
set title 'where the loop drifts: run bundled.a1, 24 samples'."\n".'schedule warmup=10; 95% bootstrap bands over the samples' noenhanced
set xlabel 'denoising step'
set ylabel 'rel-L2 of the latents vs dense (mean)'
set logscale y
set format y '10^{%L}'
set xtics 5
set xrange [0:49]
set key below noenhanced
plot 'drift-bundled.a1.dat' index 0 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 1 notitle, \
 'drift-bundled.a1.dat' index 0 using 1:2 with linespoints ls 1 ps 0.4 title 'mc-sparse @ 0.15', \
  'drift-bundled.a1.dat' index 1 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 2 notitle, \
 'drift-bundled.a1.dat' index 1 using 1:2 with linespoints ls 2 ps 0.4 title 'mc-sparse/fresh=keys @ 0.15', \
  'drift-bundled.a1.dat' index 2 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 3 notitle, \
 'drift-bundled.a1.dat' index 2 using 1:2 with linespoints ls 3 ps 0.4 title 'mc-sparse/fresh=groups @ 0.15', \
  'drift-bundled.a1.dat' index 3 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 4 notitle, \
 'drift-bundled.a1.dat' index 3 using 1:2 with linespoints ls 4 ps 0.4 title 'mc-sparse/fresh=residual @ 0.15', \
  'drift-bundled.a1.dat' index 4 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 5 notitle, \
 'drift-bundled.a1.dat' index 4 using 1:2 with linespoints ls 5 ps 0.4 title 'mc-sparse/fresh=groups+keys @ 0.15', \
  'drift-bundled.a1.dat' index 5 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 6 notitle, \
 'drift-bundled.a1.dat' index 5 using 1:2 with linespoints ls 6 ps 0.4 title 'mc-sparse/fresh=keys+residual @ 0.15', \
  'drift-bundled.a1.dat' index 6 using 1:3:4 with filledcurves fs transparent solid 0.2 noborder ls 7 notitle, \
 'drift-bundled.a1.dat' index 6 using 1:2 with linespoints ls 7 ps 0.4 title 'chipmunk/fresh=residual @ 0.15'
unset output
}
