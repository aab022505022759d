# closed_loop.gp: PSNR, SSIM and transformer speedup against the effective density, per policy
# made by experiments/closed_loop.sh; re-render inside this directory: gnuplot closed_loop.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 9in,2.8in font 'Liberation Sans,8' } else { set terminal pngcairo size 2700,840 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'closed_loop.'.fmt
set multiplot layout 1,3 title 'closed loop: model bundled, against the dense run of the same prompt and noise'
set xlabel 'effective density'
set xrange [0:*]
set format x '%.2g'
set xtics 0.1
set key off
set ylabel 'PSNR (dB)'
set key inside top right font ',6' noenhanced
plot 'closed_loop.dat' index 0 using 1:2 with linespoints ls 1 pt 4 ps 1.5 title 'baseline', \
  'closed_loop.dat' index 1 using 1:2 with linespoints ls 2 pt 5 ps 1.5 title 'mc-sparse', \
  'closed_loop.dat' index 2 using 1:2 with linespoints ls 3 pt 6 ps 1.5 title 'xattention/budget=topk', \
  'closed_loop.dat' index 3 using 1:2 with linespoints ls 4 pt 7 ps 1.5 title 'spargeattn/theta=-0.1/budget=topk', \
  'closed_loop.dat' index 4 using 1:2 with linespoints ls 5 pt 8 ps 1.5 title 'svg2/budget=topk', \
  'closed_loop.dat' index 5 using 1:2 with linespoints ls 6 pt 9 ps 1.5 title 'chipmunk', \
  'closed_loop.dat' index 6 using 1:2 with linespoints ls 7 pt 10 ps 1.5 title 'pisa', \
  'closed_loop.dat' index 7 using 1:2 with linespoints ls 8 pt 11 ps 1.5 title 'ditfastattn/window=320', \
  'closed_loop.dat' index 8 using 1:2 with linespoints ls 1 pt 12 ps 1.5 title 'sta/window=1', \
  'closed_loop.dat' index 9 using 1:2 with linespoints ls 2 pt 13 ps 1.5 title 'radial'
set ylabel 'SSIM'
set key off
plot 'closed_loop.dat' index 0 using 1:3 with linespoints ls 1 pt 4 ps 1.5 title 'baseline', \
  'closed_loop.dat' index 1 using 1:3 with linespoints ls 2 pt 5 ps 1.5 title 'mc-sparse', \
  'closed_loop.dat' index 2 using 1:3 with linespoints ls 3 pt 6 ps 1.5 title 'xattention/budget=topk', \
  'closed_loop.dat' index 3 using 1:3 with linespoints ls 4 pt 7 ps 1.5 title 'spargeattn/theta=-0.1/budget=topk', \
  'closed_loop.dat' index 4 using 1:3 with linespoints ls 5 pt 8 ps 1.5 title 'svg2/budget=topk', \
  'closed_loop.dat' index 5 using 1:3 with linespoints ls 6 pt 9 ps 1.5 title 'chipmunk', \
  'closed_loop.dat' index 6 using 1:3 with linespoints ls 7 pt 10 ps 1.5 title 'pisa', \
  'closed_loop.dat' index 7 using 1:3 with linespoints ls 8 pt 11 ps 1.5 title 'ditfastattn/window=320', \
  'closed_loop.dat' index 8 using 1:3 with linespoints ls 1 pt 12 ps 1.5 title 'sta/window=1', \
  'closed_loop.dat' index 9 using 1:3 with linespoints ls 2 pt 13 ps 1.5 title 'radial'
set ylabel 'transformer speedup'
set key off
plot 'closed_loop.dat' index 0 using 1:4 with linespoints ls 1 pt 4 ps 1.5 title 'baseline', \
  'closed_loop.dat' index 1 using 1:4 with linespoints ls 2 pt 5 ps 1.5 title 'mc-sparse', \
  'closed_loop.dat' index 2 using 1:4 with linespoints ls 3 pt 6 ps 1.5 title 'xattention/budget=topk', \
  'closed_loop.dat' index 3 using 1:4 with linespoints ls 4 pt 7 ps 1.5 title 'spargeattn/theta=-0.1/budget=topk', \
  'closed_loop.dat' index 4 using 1:4 with linespoints ls 5 pt 8 ps 1.5 title 'svg2/budget=topk', \
  'closed_loop.dat' index 5 using 1:4 with linespoints ls 6 pt 9 ps 1.5 title 'chipmunk', \
  'closed_loop.dat' index 6 using 1:4 with linespoints ls 7 pt 10 ps 1.5 title 'pisa', \
  'closed_loop.dat' index 7 using 1:4 with linespoints ls 8 pt 11 ps 1.5 title 'ditfastattn/window=320', \
  'closed_loop.dat' index 8 using 1:4 with linespoints ls 1 pt 12 ps 1.5 title 'sta/window=1', \
  'closed_loop.dat' index 9 using 1:4 with linespoints ls 2 pt 13 ps 1.5 title 'radial'
unset multiplot
unset output
}
