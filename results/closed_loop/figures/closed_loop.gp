# closed_loop.gp: closed-loop PSNR and SSIM per method and target density, 95% intervals over the samples
# made by experiments/closed_loop_fig.sh; re-render inside this directory: gnuplot closed_loop.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 7in,4.08in font 'Liberation Sans,8' } else { set terminal pngcairo size 2100,1224 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'closed_loop.'.fmt
set multiplot title "Closed loop: PSNR and SSIM of the final frames against the dense run, means over the samples with 95% bootstrap intervals over them\nbundled model, 24 samples: 12 prompts × seeds 1, 2\ncells: experiment comparison (experiments/comparison.ini) on gpu: NVIDIA H200, 2026-12-04" noenhanced font ',8'
set tmargin at screen 0.843; set bmargin at screen 0.311
set xrange [-0.5:2.5]
set xtics ("ρ 0.1\n(0.086-0.125)" 0, "ρ 0.15\n(0.129-0.156)" 1, "ρ 0.25\n(0.250)" 2) noenhanced font ',7'
set xlabel 'target ρ (computed, past the warm-up)' noenhanced offset 0,-0.6
set grid ytics noxtics
set key off
f = 'closed_loop.dat'
set lmargin at screen 0.07; set rmargin at screen 0.377
set ylabel 'PSNR against the dense run (dB)'
plot f index 0 using 1:2 with lines ls 2 lw 2 notitle, \
  f index 0 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 2 lw 1.6 pt 5 ps 1.4 title "mc-sparse", \
  f index 0 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 2 lw 1.6 pt 4 ps 1.4 notitle, \
  f index 0 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 2 notitle, \
  f index 1 using 1:2 with lines ls 1 lw 0.7 notitle, \
  f index 1 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 1 lw 0.8 pt 7 ps 1.15 title "est-block", \
  f index 1 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 1 lw 0.8 pt 6 ps 1.15 notitle, \
  f index 1 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 1 notitle, \
  f index 2 using 1:2 with lines ls 3 lw 0.7 notitle, \
  f index 2 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 3 lw 0.8 pt 9 ps 1.15 title "svg2/budget=matched", \
  f index 2 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 3 lw 0.8 pt 8 ps 1.15 notitle, \
  f index 2 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 3 notitle, \
  f index 3 using 1:2 with lines ls 4 lw 0.7 notitle, \
  f index 3 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 4 lw 0.8 pt 11 ps 1.15 title "xattention/budget=matched", \
  f index 3 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 4 lw 0.8 pt 10 ps 1.15 notitle, \
  f index 3 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 4 notitle, \
  f index 4 using 1:2 with lines ls 8 lw 0.7 notitle, \
  f index 4 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 8 lw 0.8 pt 13 ps 1.15 title "sta/budget=matched", \
  f index 4 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 8 lw 0.8 pt 12 ps 1.15 notitle, \
  f index 4 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 8 notitle, \
  f index 5 using 1:2 with lines ls 10 lw 0.7 notitle, \
  f index 5 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 10 lw 0.8 pt 15 ps 1.15 title "ditfastattn/budget=matched", \
  f index 5 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 10 lw 0.8 pt 14 ps 1.15 notitle, \
  f index 5 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 10 notitle, \
  f index 6 using 1:2 with lines ls 9 lw 0.7 notitle, \
  f index 6 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 9 lw 0.8 pt 5 ps 1.15 title "chipmunk", \
  f index 6 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 9 lw 0.8 pt 4 ps 1.15 notitle, \
  f index 6 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 9 notitle, \
  f index 7 using 1:2 with lines ls 6 lw 0.7 notitle, \
  f index 7 using 1:($10 > 0 ? NaN : $2):3:4 with yerrorbars ls 6 lw 0.8 pt 7 ps 1.15 title "pisa", \
  f index 7 using 1:($10 > 0 ? $2 : NaN):3:4 with yerrorbars ls 6 lw 0.8 pt 6 ps 1.15 notitle, \
  f index 7 using 1:($10 > 0 ? $4 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 6 notitle
set key off
set lmargin at screen 0.457; set rmargin at screen 0.764
set ylabel 'SSIM against the dense run'
set label 1 "hollow markers with ‡: computed density (past the warm-up) more than 0.02 from the target, drawn at it all the same (a peer's table row says cannot reach ρ):\nρ 0.1: mc-sparse, est-block, chipmunk, pisa (computed 0.125); ρ 0.15: sta/budget=matched (computed 0.129)\nnot drawn: one computed density whatever the target, more than 0.02 from it, or PSNR inf:\nspargeattn/budget=matched (computed 0.999 at every ρ); radial/budget=matched (computed 0.688 at every ρ)" at screen 0.01, screen 0.110 left noenhanced font ',6'
set key at screen 0.779, screen 0.831 left top Left reverse noenhanced font ',7' samplen 1.5 spacing 1.15 title 'method'
plot f index 0 using 1:5 with lines ls 2 lw 2 notitle, \
  f index 0 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 2 lw 1.6 pt 5 ps 1.4 title "mc-sparse", \
  f index 0 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 2 lw 1.6 pt 4 ps 1.4 notitle, \
  f index 0 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 2 notitle, \
  f index 1 using 1:5 with lines ls 1 lw 0.7 notitle, \
  f index 1 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 1 lw 0.8 pt 7 ps 1.15 title "est-block", \
  f index 1 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 1 lw 0.8 pt 6 ps 1.15 notitle, \
  f index 1 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 1 notitle, \
  f index 2 using 1:5 with lines ls 3 lw 0.7 notitle, \
  f index 2 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 3 lw 0.8 pt 9 ps 1.15 title "svg2/budget=matched", \
  f index 2 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 3 lw 0.8 pt 8 ps 1.15 notitle, \
  f index 2 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 3 notitle, \
  f index 3 using 1:5 with lines ls 4 lw 0.7 notitle, \
  f index 3 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 4 lw 0.8 pt 11 ps 1.15 title "xattention/budget=matched", \
  f index 3 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 4 lw 0.8 pt 10 ps 1.15 notitle, \
  f index 3 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 4 notitle, \
  f index 4 using 1:5 with lines ls 8 lw 0.7 notitle, \
  f index 4 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 8 lw 0.8 pt 13 ps 1.15 title "sta/budget=matched", \
  f index 4 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 8 lw 0.8 pt 12 ps 1.15 notitle, \
  f index 4 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 8 notitle, \
  f index 5 using 1:5 with lines ls 10 lw 0.7 notitle, \
  f index 5 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 10 lw 0.8 pt 15 ps 1.15 title "ditfastattn/budget=matched", \
  f index 5 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 10 lw 0.8 pt 14 ps 1.15 notitle, \
  f index 5 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 10 notitle, \
  f index 6 using 1:5 with lines ls 9 lw 0.7 notitle, \
  f index 6 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 9 lw 0.8 pt 5 ps 1.15 title "chipmunk", \
  f index 6 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 9 lw 0.8 pt 4 ps 1.15 notitle, \
  f index 6 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 9 notitle, \
  f index 7 using 1:5 with lines ls 6 lw 0.7 notitle, \
  f index 7 using 1:($10 > 0 ? NaN : $5):6:7 with yerrorbars ls 6 lw 0.8 pt 7 ps 1.15 title "pisa", \
  f index 7 using 1:($10 > 0 ? $5 : NaN):6:7 with yerrorbars ls 6 lw 0.8 pt 6 ps 1.15 notitle, \
  f index 7 using 1:($10 > 0 ? $7 : NaN):("‡") with labels offset 0,0.55 center font ',7' tc ls 6 notitle
set key off
unset multiplot
unset output
}
