# error_vs_density.gp: mean rel_l2 against the computed density, per policy
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ablation
# trace synth: grid=5x16x32 heads=4 layers=4 steps=10 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:13:23Z
# re-render inside this directory: gnuplot error_vs_density.gp   (writes error_vs_density.pdf and error_vs_density.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 6.80in,3.83in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2040,1149 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'error_vs_density.'.fmt
set multiplot
set logscale xy
set xrange [0.05:1]
set xtics (0.05, 0.1, 0.2, 0.5, 1)
set mxtics default
set mytics default
set offsets graph 0.06, graph 0.06, 0, 0
set xlabel 'computed density {/:Italic ρ} (targets 0.1, 0.15, 0.25)' offset 0,0.3
set ylabel 'relative L_2 error (mean)'
set lmargin at screen 0.0882
set rmargin at screen 0.4824
set bmargin at screen 0.4961
set tmargin at screen 0.9269
set key at screen 0.0662, screen 0.3864 left top vertical maxrows 3 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.05:2]
set ytics (0.05, 0.1, 0.2, 0.5, 1, 2)
set title '(a) MC-Sparse factorial (refresh=anchor)' noenhanced
plot 'error_vs_density.dat' index 0 using ($1*0.9512):2:3:4 with yerrorlines ls 1 title 'baseline' noenhanced, \
	'error_vs_density.dat' index 1 using ($1*0.9649):2:3:4 with yerrorlines ls 2 title 'mc-grouping' noenhanced, \
	'error_vs_density.dat' index 2 using ($1*0.9788):2:3:4 with yerrorlines ls 3 title 'mc-selection' noenhanced, \
	'error_vs_density.dat' index 3 using ($1*0.9929):2:3:4 with yerrorlines ls 4 title 'mc-residual' noenhanced, \
	'error_vs_density.dat' index 4 using ($1*1.0072):2:3:4 with yerrorlines ls 5 title 'mc-gs' noenhanced, \
	'error_vs_density.dat' index 5 using ($1*1.0217):2:3:4 with yerrorlines ls 6 title 'mc-gr' noenhanced, \
	'error_vs_density.dat' index 6 using ($1*1.0364):2:3:4 with yerrorlines ls 7 title 'mc-sr' noenhanced, \
	'error_vs_density.dat' index 7 using ($1*1.0513):2:3:4 with yerrorlines ls 8 title 'mc-sparse' noenhanced
set lmargin at screen 0.5882
set rmargin at screen 0.9824
set bmargin at screen 0.4961
set tmargin at screen 0.9269
set key at screen 0.5662, screen 0.3864 left top vertical maxrows 11 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.05:2]
set ytics (0.05, 0.1, 0.2, 0.5, 1, 2)
set title '(b) other policies' noenhanced
plot 'error_vs_density.dat' index 8 using ($1*0.9512):2:3:4 with yerrorlines ls 1 title 'xattention/budget=topk' noenhanced, \
	'error_vs_density.dat' index 9 using ($1*0.9608):2:3:4 with yerrorlines ls 2 title 'spargeattn/theta=-0.1/budget=topk' noenhanced, \
	'error_vs_density.dat' index 10 using ($1*0.9704):2:3:4 with yerrorlines ls 3 title 'svg2/budget=topk' noenhanced, \
	'error_vs_density.dat' index 11 using ($1*0.9802):2:3:4 with yerrorlines ls 4 title 'chipmunk' noenhanced, \
	'error_vs_density.dat' index 12 using ($1*0.9900):2:3:4 with yerrorlines ls 5 title 'pisa' noenhanced, \
	'error_vs_density.dat' index 13 using ($1*1.0000):2:3:4 with yerrorlines ls 6 title 'ditfastattn/window=130' noenhanced, \
	'error_vs_density.dat' index 14 using ($1*1.0101):2:3:4 with yerrorlines ls 7 title 'ditfastattn/window=197' noenhanced, \
	'error_vs_density.dat' index 15 using ($1*1.0202):2:3:4 with yerrorlines ls 8 title 'ditfastattn/window=335' noenhanced, \
	'error_vs_density.dat' index 16 using ($1*1.0305):2:3:4 with yerrorlines ls 9 title 'sta/window=1' noenhanced, \
	'error_vs_density.dat' index 17 using ($1*1.0408):2:3:4 with yerrorlines ls 10 title 'sta/window=2' noenhanced, \
	'error_vs_density.dat' index 18 using ($1*1.0513):2:3:4 with yerrorlines ls 11 title 'radial' noenhanced
unset multiplot
unset output
}
