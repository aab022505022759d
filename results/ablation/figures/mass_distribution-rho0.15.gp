# mass_distribution-rho0.15.gp: distribution over units of the retained attention mass
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ablation
# trace synth: grid=5x16x32 heads=4 layers=4 steps=10 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:13:23Z
# re-render inside this directory: gnuplot mass_distribution-rho0.15.gp   (writes mass_distribution-rho0.15.pdf and mass_distribution-rho0.15.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 6.80in,3.83in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2040,1149 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'mass_distribution-rho0.15.'.fmt
set multiplot
set yrange [0:1]
set xlabel 'retained mass (mean over queries)' offset 0,0.3
set ylabel 'fraction of units'
set lmargin at screen 0.0882
set rmargin at screen 0.4824
set bmargin at screen 0.4961
set tmargin at screen 0.9269
set key at screen 0.0662, screen 0.3864 left top vertical maxrows 4 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0.1:1]
set xtics 0.2
set title '(a) MC-Sparse factorial, {/:Italic ρ} = 0.15 (computed 0.15)'
plot 'mass_distribution-rho0.15.dat' index 0 using 1:2 with lines ls 1 title 'baseline' noenhanced, \
	'mass_distribution-rho0.15.dat' index 1 using 1:2 with lines ls 2 title 'mc-grouping' noenhanced, \
	'mass_distribution-rho0.15.dat' index 2 using 1:2 with lines ls 3 title 'mc-selection' noenhanced, \
	'mass_distribution-rho0.15.dat' index 3 using 1:2 with lines ls 4 dt (4,4) title 'mc-residual = baseline' noenhanced, \
	'mass_distribution-rho0.15.dat' index 4 using 1:2 with lines ls 5 title 'mc-gs' noenhanced, \
	'mass_distribution-rho0.15.dat' index 5 using 1:2 with lines ls 6 dt (4,4) title 'mc-gr = mc-grouping' noenhanced, \
	'mass_distribution-rho0.15.dat' index 6 using 1:2 with lines ls 7 dt (4,4) title 'mc-sr = mc-selection' noenhanced, \
	'mass_distribution-rho0.15.dat' index 7 using 1:2 with lines ls 8 dt (4,4) title 'mc-sparse = mc-gs' noenhanced
set lmargin at screen 0.5882
set rmargin at screen 0.9824
set bmargin at screen 0.4961
set tmargin at screen 0.9269
set key at screen 0.5662, screen 0.3864 left top vertical maxrows 11 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0.1:1]
set xtics 0.2
set title '(b) other policies, {/:Italic ρ} = 0.15 (computed 0.15)'
plot 'mass_distribution-rho0.15.dat' index 8 using 1:2 with lines ls 1 title 'xattention/budget=topk' noenhanced, \
	'mass_distribution-rho0.15.dat' index 9 using 1:2 with lines ls 2 title 'spargeattn/theta=-0.1/budget=topk' noenhanced, \
	'mass_distribution-rho0.15.dat' index 10 using 1:2 with lines ls 3 title 'svg2/budget=topk' noenhanced, \
	'mass_distribution-rho0.15.dat' index 11 using 1:2 with lines ls 4 title 'chipmunk' noenhanced, \
	'mass_distribution-rho0.15.dat' index 12 using 1:2 with lines ls 5 title 'pisa' noenhanced, \
	'mass_distribution-rho0.15.dat' index 13 using 1:2 with lines ls 6 title 'ditfastattn/window=130' noenhanced, \
	'mass_distribution-rho0.15.dat' index 14 using 1:2 with lines ls 7 title 'ditfastattn/window=197' noenhanced, \
	'mass_distribution-rho0.15.dat' index 15 using 1:2 with lines ls 8 title 'ditfastattn/window=335' noenhanced, \
	'mass_distribution-rho0.15.dat' index 16 using 1:2 with lines ls 9 title 'sta/window=1' noenhanced, \
	'mass_distribution-rho0.15.dat' index 17 using 1:2 with lines ls 10 title 'sta/window=2' noenhanced, \
	'mass_distribution-rho0.15.dat' index 18 using 1:2 with lines ls 11 title 'radial' noenhanced
unset multiplot
unset output
}
