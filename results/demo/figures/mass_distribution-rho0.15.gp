# mass_distribution-rho0.15.gp: distribution over units of the retained attention mass
# made by dsgap plot (dsgap 0.1.0, commit 1d94d6fbbe68) from dsgap-demo
# trace dsgap-demo/trace.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source diffusion_pytorch_model.safetensors); metrics by commit 1d94d6fbbe68 on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-05T11:39:41Z
# re-render inside this directory: gnuplot mass_distribution-rho0.15.gp   (writes mass_distribution-rho0.15.pdf and mass_distribution-rho0.15.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 6.80in,2.92in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2040,876 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'mass_distribution-rho0.15.'.fmt
set multiplot
set yrange [0:1]
set xlabel 'retained mass (mean over queries)' offset 0,0.3
set ylabel 'fraction of units'
set lmargin at screen 0.0882
set rmargin at screen 0.4824
set bmargin at screen 0.3390
set tmargin at screen 0.9041
set key at screen 0.0662, screen 0.1952 left top vertical maxrows 3 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0.2:1]
set xtics 0.2
set title '(a) oracle ladder, {/:Italic ρ} = 0.15 (computed 0.156)'
plot 'mass_distribution-rho0.15.dat' index 0 using 1:2 with lines ls 1 title 'est-block' noenhanced, \
	'mass_distribution-rho0.15.dat' index 1 using 1:2 with lines ls 2 title 'oracle-block' noenhanced, \
	'mass_distribution-rho0.15.dat' index 2 using 1:2 with lines ls 3 title 'oracle-tile' noenhanced, \
	'mass_distribution-rho0.15.dat' index 3 using 1:2 with lines ls 4 title 'oracle-pca' noenhanced, \
	'mass_distribution-rho0.15.dat' index 4 using 1:2 with lines ls 5 title 'oracle' noenhanced, \
	'mass_distribution-rho0.15.dat' index 5 using 1:2 with lines ls 6 dt (4,4) title 'oracle+res = oracle' noenhanced
set lmargin at screen 0.5882
set rmargin at screen 0.9824
set bmargin at screen 0.3390
set tmargin at screen 0.9041
set key at screen 0.5662, screen 0.1952 left top vertical maxrows 4 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0.2:1]
set xtics 0.2
set title '(b) MC-Sparse factorial, {/:Italic ρ} = 0.15 (computed 0.156)'
plot 'mass_distribution-rho0.15.dat' index 6 using 1:2 with lines ls 1 title 'baseline' noenhanced, \
	'mass_distribution-rho0.15.dat' index 7 using 1:2 with lines ls 2 title 'mc-grouping' noenhanced, \
	'mass_distribution-rho0.15.dat' index 8 using 1:2 with lines ls 3 title 'mc-selection' noenhanced, \
	'mass_distribution-rho0.15.dat' index 9 using 1:2 with lines ls 4 dt (4,4) title 'mc-residual = baseline' noenhanced, \
	'mass_distribution-rho0.15.dat' index 10 using 1:2 with lines ls 5 title 'mc-gs' noenhanced, \
	'mass_distribution-rho0.15.dat' index 11 using 1:2 with lines ls 6 dt (4,4) title 'mc-gr = mc-grouping' noenhanced, \
	'mass_distribution-rho0.15.dat' index 12 using 1:2 with lines ls 7 dt (4,4) title 'mc-sr = mc-selection' noenhanced, \
	'mass_distribution-rho0.15.dat' index 13 using 1:2 with lines ls 8 dt (4,4) title 'mc-sparse = mc-gs' noenhanced
unset multiplot
unset output
}
