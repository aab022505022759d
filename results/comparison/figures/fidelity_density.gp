# fidelity_density.gp: made by experiments/comparison.sh
# re-render inside this directory: gnuplot fidelity_density.gp   (writes fidelity_density.pdf and .png)
load 'style.gp'
set encoding utf8
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 6.5in,4.8in font 'Liberation Sans,8' } else { set terminal pngcairo size 1950,1440 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'fidelity_density.'.fmt
set title 'bundled model, 24 samples: fidelity against computed density' noenhanced
set xlabel "computed density of the sparse calls past the warm-up (pairs / N², log scale; dodged ±5% by method)\nnot speed: metadata costs are not in it. Labels: the target ρ of a point off it by more than 0.02\nnot drawn: spargeattn/budget=matched (PSNR not finite; density 0.999)" noenhanced
set ylabel 'PSNR of the final latents against dense (dB), 95% CI over samples' noenhanced
set key outside right top vertical Left reverse noenhanced font ',7' samplen 2
set offsets 0, 0, graph 0.06, graph 0.04
set logscale x
set xrange [0.07305:1.1]
set xtics (0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1)
plot 'fidelity_density.dat' index 0 using 7:2:3:4 with yerrorbars ls 2 lw 1.6 ps 1.6 title 'mc-sparse', \
  '' index 0 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 1 using 7:2:3:4 with yerrorbars ls 1 lw 1 ps 1.3 title 'est-block', \
  '' index 1 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 2 using 7:2:3:4 with yerrorbars ls 3 lw 1 ps 1.3 title 'svg2/budget=matched', \
  '' index 2 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 3 using 7:2:3:4 with yerrorbars ls 4 lw 1 ps 1.3 title 'xattention/budget=matched', \
  '' index 3 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 4 using 7:2:3:4 with yerrorbars ls 5 lw 1 ps 1.3 title 'radial/budget=matched', \
  '' index 4 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 5 using 7:2:3:4 with yerrorbars ls 6 lw 1 ps 1.3 title 'sta/budget=matched', \
  '' index 5 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 6 using 7:2:3:4 with yerrorbars ls 10 lw 1 ps 1.3 title 'ditfastattn/budget=matched', \
  '' index 6 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 7 using 7:2:3:4 with yerrorbars ls 11 lw 1 ps 1.3 title 'chipmunk', \
  '' index 7 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 8 using 7:2:3:4 with yerrorbars ls 12 lw 1 ps 1.3 title 'pisa', \
  '' index 8 using 7:2:($6 > 0 ? stringcolumn(5) : '') with labels offset 0.8, 0 left font ',6' textcolor rgb '#444444' notitle, \
  'fidelity_density.dat' index 9 using 1:2 with lines ls 8 dt 2 lw 1 title 'frontier'
unset output
}
