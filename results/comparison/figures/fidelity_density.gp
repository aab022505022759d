# fidelity_density.gp: made by experiments/comparison.sh
# re-render inside this directory: gnuplot fidelity_density.gp   (writes fidelity_density.pdf and .png)
load 'style.gp'
set encoding utf8
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 6.5in,4.8in font 'Liberation Sans,8' } else { set terminal pngcairo size 1950,1440 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'fidelity_density.'.fmt
set title 'bundled model, 24 samples: fidelity against computed density' noenhanced
set xlabel "computed density of the sparse calls past the warm-up (pairs / N², log scale; dodged ±5% by method)\nnot speed: metadata costs are not in it; hollow with ‡: more than 0.02 from its target ρ:\nρ 0.1: mc-sparse, est-block, chipmunk, pisa (computed 0.125);\nρ 0.1/0.15/0.25: radial/budget=matched (computed 0.688);\nρ 0.15: sta/budget=matched (computed 0.129)\nnot drawn: spargeattn/budget=matched (PSNR not finite; density 0.999)" noenhanced
set ylabel 'PSNR of the final latents against dense (dB), 95% CI over samples' noenhanced
set key outside right top vertical Left reverse noenhanced font ',7' samplen 2
set offsets 0, 0, graph 0.06, graph 0.04
set logscale x
set xrange [0.07305:1.1]
set xtics (0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1)
plot 'fidelity_density.dat' index 0 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 2 lw 1.6 pt 5 ps 1.6 title 'mc-sparse', \
  '' index 0 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 2 lw 1.6 pt 4 ps 1.6 notitle, \
  '' index 0 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 2 notitle, \
  'fidelity_density.dat' index 1 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 1 lw 1 pt 7 ps 1.3 title 'est-block', \
  '' index 1 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 1 lw 1 pt 6 ps 1.3 notitle, \
  '' index 1 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 1 notitle, \
  'fidelity_density.dat' index 2 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 3 lw 1 pt 9 ps 1.3 title 'svg2/budget=matched', \
  '' index 2 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 3 lw 1 pt 8 ps 1.3 notitle, \
  '' index 2 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 3 notitle, \
  'fidelity_density.dat' index 3 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 4 lw 1 pt 11 ps 1.3 title 'xattention/budget=matched', \
  '' index 3 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 4 lw 1 pt 10 ps 1.3 notitle, \
  '' index 3 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 4 notitle, \
  'fidelity_density.dat' index 4 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 5 lw 1 pt 13 ps 1.3 title 'radial/budget=matched', \
  '' index 4 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 5 lw 1 pt 12 ps 1.3 notitle, \
  '' index 4 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 5 notitle, \
  'fidelity_density.dat' index 5 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 6 lw 1 pt 15 ps 1.3 title 'sta/budget=matched', \
  '' index 5 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 6 lw 1 pt 14 ps 1.3 notitle, \
  '' index 5 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 6 notitle, \
  'fidelity_density.dat' index 6 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 10 lw 1 pt 5 ps 1.3 title 'ditfastattn/budget=matched', \
  '' index 6 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 10 lw 1 pt 4 ps 1.3 notitle, \
  '' index 6 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 10 notitle, \
  'fidelity_density.dat' index 7 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 11 lw 1 pt 7 ps 1.3 title 'chipmunk', \
  '' index 7 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 11 lw 1 pt 6 ps 1.3 notitle, \
  '' index 7 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 11 notitle, \
  'fidelity_density.dat' index 8 using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls 12 lw 1 pt 9 ps 1.3 title 'pisa', \
  '' index 8 using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls 12 lw 1 pt 8 ps 1.3 notitle, \
  '' index 8 using 7:($6 > 0 ? $4 : NaN):("‡") with labels offset 0, 0.55 center font ',7' tc ls 12 notitle, \
  'fidelity_density.dat' index 9 using 1:2 with lines ls 8 dt 2 lw 1 title 'frontier'
unset output
}
