# pareto.gp: made by dsgap compare (commit 6111ff07ac8c): bundled model, 24 samples, 50 steps
# re-render inside this directory: gnuplot pareto.gp   (writes pareto.pdf and pareto.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 6.5in,4.6in font 'Liberation Sans,8' } else { set terminal pngcairo size 1950,1380 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'pareto.'.fmt
set title 'bundled model, 24 samples, 50 steps'.': fidelity against speedup' noenhanced
set xlabel 'speedup over dense, projected from measured step costs ('.'gpu: NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79 GiB)'.')' noenhanced
set ylabel 'PSNR of the final latents against dense (dB), 95% CI over samples' noenhanced
set bmargin 9
set key at screen 0.5, screen 0.01 center bottom horizontal maxrows 2 Left reverse noenhanced font ',7' samplen 2 width 1
set offsets graph 0, graph 0.12, graph 0.05, graph 0.05
set xrange [0:*]
set arrow from 1, graph 0 to 1, graph 1 nohead ls 9 dt 3
set label 'dense (1x)' at 1, graph 0.97 left offset 0.5, 0 font ',7' textcolor rgb '#666666'
plot 'pareto.dat' index 0 using 1:2:3:4 with yerrorbars ls 1 ps 1.4 title 'mc-sparse', \
  '' index 0 using 1:8:7 with labels offset 0.6, 0.6 left font ',6' textcolor rgb '#444444' notitle, \
  'pareto.dat' index 1 using 1:2:3:4 with yerrorbars ls 2 ps 1.4 title 'chipmunk', \
  '' index 1 using 1:8:7 with labels offset -0.6, 0.6 right font ',6' textcolor rgb '#444444' notitle, \
  'pareto.dat' index 2 using 1:2:3:4 with yerrorbars ls 3 ps 1.4 title 'est-block', \
  '' index 2 using 1:8:7 with labels offset 0.6, -0.8 left font ',6' textcolor rgb '#444444' notitle, \
  'pareto.dat' index 3 using 1:2:3:4 with yerrorbars ls 4 ps 1.4 title 'svg2/budget=matched', \
  '' index 3 using 1:8:7 with labels offset 0.6, 0.6 left font ',6' textcolor rgb '#444444' notitle, \
  'pareto.dat' index 4 using 1:2:3:4 with yerrorbars ls 5 ps 1.4 title 'pisa', \
  '' index 4 using 1:8:7 with labels offset -0.6, 0.6 right font ',6' textcolor rgb '#444444' notitle, \
  'pareto.dat' index 5 using 1:2 with lines ls 8 dt 2 lw 1 title 'frontier (labels: schedule, density)'
unset output
}
