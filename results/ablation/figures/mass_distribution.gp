# mass_distribution.gp: distribution over units of the retained attention mass
# made by dsgap plot (dsgap 0.1.0, commit 6ce75697026a) from /work/main/build/experiments/ablation/synthetic.w3
# trace synth: grid=5x16x32 heads=4 layers=4 steps=10 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 6ce75697026a on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-02T15:18:02Z
# re-render inside this directory: gnuplot mass_distribution.gp   (writes mass_distribution.pdf and mass_distribution.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.92in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,876 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'mass_distribution.'.fmt
set multiplot
set yrange [0:1]
set xlabel 'retained mass (mean over queries)' offset 0,0.3
set ylabel 'fraction of units'
set lmargin at screen 0.1765
set rmargin at screen 0.9647
set bmargin at screen 0.3390
set tmargin at screen 0.9041
set key at screen 0.1324, screen 0.1952 left top vertical maxrows 4 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0.1:1]
set xtics 0.2
set title '(a) MC-Sparse factorial, {/:Italic ρ} = 0.15'
plot 'mass_distribution.dat' index 0 using 1:2 with lines ls 1 title 'baseline' noenhanced, \
	'mass_distribution.dat' index 1 using 1:2 with lines ls 2 title 'mc-grouping' noenhanced, \
	'mass_distribution.dat' index 2 using 1:2 with lines ls 3 title 'mc-selection' noenhanced, \
	'mass_distribution.dat' index 3 using 1:2 with lines ls 4 dt (4,4) title 'mc-residual = baseline' noenhanced, \
	'mass_distribution.dat' index 4 using 1:2 with lines ls 5 title 'mc-gs' noenhanced, \
	'mass_distribution.dat' index 5 using 1:2 with lines ls 6 dt (4,4) title 'mc-gr = mc-grouping' noenhanced, \
	'mass_distribution.dat' index 6 using 1:2 with lines ls 7 dt (4,4) title 'mc-sr = mc-selection' noenhanced, \
	'mass_distribution.dat' index 7 using 1:2 with lines ls 8 dt (4,4) title 'mc-sparse = mc-gs' noenhanced
unset multiplot
unset output
}
