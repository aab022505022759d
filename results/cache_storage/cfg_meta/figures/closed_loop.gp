# closed_loop.gp: closed-loop PSNR and SSIM per method and target density, 95% intervals over the samples
# made by experiments/closed_loop_fig.sh; re-render inside this directory: gnuplot closed_loop.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 7in,3.82in font 'Liberation Sans,8' } else { set terminal pngcairo size 2100,1145 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'closed_loop.'.fmt
set multiplot title "Closed loop: PSNR and SSIM of the final frames against the dense run, means over the samples with 95% bootstrap intervals over them\nbundled model, 12 samples: 6 prompts × seeds 1, 2\ncells: experiment cfg_meta (experiments/cfg_meta.ini) on cpu: AMD EPYC, 2026-12-06" noenhanced font ',8'
set tmargin at screen 0.832; set bmargin at screen 0.264
set xrange [-0.5:1.5]
set xtics ("ρ 0.15\n(0.188)" 0, "ρ 0.25\n(0.250)" 1) noenhanced font ',7'
set xlabel 'target ρ (computed, past the warm-up)' noenhanced offset 0,-0.6
set grid ytics noxtics
set key off
f = 'closed_loop.dat'
set lmargin at screen 0.07; set rmargin at screen 0.380
set ylabel 'PSNR against the dense run (dB)'
plot f index 0 using 1:2 with lines ls 2 lw 2 notitle, \
  f index 0 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 2 lw 1.6 pt 5 ps 1.4 title "mc-sparse/cfg_meta=shared", \
  f index 0 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 2 lw 1.6 pt 4 ps 1.4 notitle, \
  f index 0 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 2 notitle, \
  f index 1 using 1:2 with lines ls 1 lw 0.7 notitle, \
  f index 1 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 1 lw 0.8 pt 7 ps 1.15 title "mc-sparse", \
  f index 1 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 1 lw 0.8 pt 6 ps 1.15 notitle, \
  f index 1 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 1 notitle
set key off
set lmargin at screen 0.460; set rmargin at screen 0.770
set ylabel 'SSIM against the dense run'
set label 1 "hollow markers with ‡: computed density (past the warm-up) more than 0.02 from the target, drawn at it all the same (a peer's table row says cannot reach ρ):\nρ 0.15: mc-sparse/cfg_meta=shared, mc-sparse (computed 0.188)" at screen 0.01, screen 0.050 left noenhanced font ',6'
set key at screen 0.785, screen 0.819 left top Left reverse noenhanced font ',7' samplen 1.5 spacing 1.15 title 'method'
plot f index 0 using 1:5 with lines ls 2 lw 2 notitle, \
  f index 0 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 2 lw 1.6 pt 5 ps 1.4 title "mc-sparse/cfg_meta=shared", \
  f index 0 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 2 lw 1.6 pt 4 ps 1.4 notitle, \
  f index 0 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 2 notitle, \
  f index 1 using 1:5 with lines ls 1 lw 0.7 notitle, \
  f index 1 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 1 lw 0.8 pt 7 ps 1.15 title "mc-sparse", \
  f index 1 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 1 lw 0.8 pt 6 ps 1.15 notitle, \
  f index 1 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 1 notitle
set key off
unset multiplot
unset output
}
