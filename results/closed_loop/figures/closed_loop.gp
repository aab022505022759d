# closed_loop.gp: closed-loop PSNR and SSIM per method and target density, 95% intervals over the samples
# made by experiments/closed_loop_fig.sh; re-render inside this directory: gnuplot closed_loop.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 7in,3.95in font 'Liberation Sans,8' } else { set terminal pngcairo size 2100,1185 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'closed_loop.'.fmt
set multiplot title "Closed loop: PSNR and SSIM of the final frames against the dense run, means over the samples with 95% bootstrap intervals over them\nbundled model, 24 samples: 12 prompts × seeds 1, 2\ncells: experiment comparison (experiments/comparison.ini) on gpu: NVIDIA H200, 2026-12-04" noenhanced font ',8'
set tmargin at screen 0.838; set bmargin at screen 0.289
set xrange [-0.5:2.5]
set xtics ("ρ 0.1\n(0.086-0.125)" 0, "ρ 0.15\n(0.150-0.156)" 1, "ρ 0.25\n(0.250)" 2) noenhanced font ',7'
set xlabel 'target ρ (computed, past the warm-up)' noenhanced offset 0,-0.6
set grid ytics noxtics
set key off
f = 'closed_loop.dat'
set lmargin at screen 0.07; set rmargin at screen 0.377
set ylabel 'PSNR against the dense run (dB)'
plot f index 0 using 1:2 with lines ls 2 lw 2 notitle, \
  f index 0 using 1:2:3:4 with yerrorbars ls 2 lw 1.6 ps 1.3 title "mc-sparse", \
  f index 1 using 1:2 with lines ls 1 lw 0.7 notitle, \
  f index 1 using 1:2:3:4 with yerrorbars ls 1 lw 0.8 ps 0.9 title "est-block", \
  f index 2 using 1:2 with lines ls 3 lw 0.7 notitle, \
  f index 2 using 1:2:3:4 with yerrorbars ls 3 lw 0.8 ps 0.9 title "svg2/budget=matched", \
  f index 3 using 1:2 with lines ls 4 lw 0.7 notitle, \
  f index 3 using 1:2:3:4 with yerrorbars ls 4 lw 0.8 ps 0.9 title "xattention/budget=matched", \
  f index 4 using 1:2 with lines ls 8 lw 0.7 notitle, \
  f index 4 using 1:2:3:4 with yerrorbars ls 8 lw 0.8 ps 0.9 title "sta/budget=matched", \
  f index 5 using 1:2 with lines ls 10 lw 0.7 notitle, \
  f index 5 using 1:2:3:4 with yerrorbars ls 10 lw 0.8 ps 0.9 title "ditfastattn/budget=matched", \
  f index 6 using 1:2 with lines ls 9 lw 0.7 notitle, \
  f index 6 using 1:2:3:4 with yerrorbars ls 9 lw 0.8 ps 0.9 title "chipmunk", \
  f index 7 using 1:2 with lines ls 6 lw 0.7 notitle, \
  f index 7 using 1:2:3:4 with yerrorbars ls 6 lw 0.8 ps 0.9 title "pisa"
set key off
set lmargin at screen 0.457; set rmargin at screen 0.764
set ylabel 'SSIM against the dense run'
set label 1 "not drawn, cannot reach the density (computed past the warm-up more than 0.02 from the target):\nspargeattn/budget=matched at ρ 0.1, 0.15, 0.25 (computed 0.999); radial/budget=matched at ρ 0.1, 0.15, 0.25 (computed 0.688);\nsta/budget=matched at ρ 0.15 (computed 0.129); chipmunk at ρ 0.1 (computed 0.125); pisa at ρ 0.1 (computed 0.125)" at screen 0.01, screen 0.081 left noenhanced font ',6'
set key at screen 0.779, screen 0.825 left top Left reverse noenhanced font ',7' samplen 1.5 spacing 1.15 title 'method'
plot f index 0 using 1:5 with lines ls 2 lw 2 notitle, \
  f index 0 using 1:5:6:7 with yerrorbars ls 2 lw 1.6 ps 1.3 title "mc-sparse", \
  f index 1 using 1:5 with lines ls 1 lw 0.7 notitle, \
  f index 1 using 1:5:6:7 with yerrorbars ls 1 lw 0.8 ps 0.9 title "est-block", \
  f index 2 using 1:5 with lines ls 3 lw 0.7 notitle, \
  f index 2 using 1:5:6:7 with yerrorbars ls 3 lw 0.8 ps 0.9 title "svg2/budget=matched", \
  f index 3 using 1:5 with lines ls 4 lw 0.7 notitle, \
  f index 3 using 1:5:6:7 with yerrorbars ls 4 lw 0.8 ps 0.9 title "xattention/budget=matched", \
  f index 4 using 1:5 with lines ls 8 lw 0.7 notitle, \
  f index 4 using 1:5:6:7 with yerrorbars ls 8 lw 0.8 ps 0.9 title "sta/budget=matched", \
  f index 5 using 1:5 with lines ls 10 lw 0.7 notitle, \
  f index 5 using 1:5:6:7 with yerrorbars ls 10 lw 0.8 ps 0.9 title "ditfastattn/budget=matched", \
  f index 6 using 1:5 with lines ls 9 lw 0.7 notitle, \
  f index 6 using 1:5:6:7 with yerrorbars ls 9 lw 0.8 ps 0.9 title "chipmunk", \
  f index 7 using 1:5 with lines ls 6 lw 0.7 notitle, \
  f index 7 using 1:5:6:7 with yerrorbars ls 6 lw 0.8 ps 0.9 title "pisa"
set key off
unset multiplot
unset output
}
