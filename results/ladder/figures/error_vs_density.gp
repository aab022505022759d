# error_vs_density.gp: mean rel_l2 against the computed density, per policy
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ladder
# trace synth: grid=5x16x32 heads=4 layers=3 steps=6 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:09:21Z
# re-render inside this directory: gnuplot error_vs_density.gp   (writes error_vs_density.pdf and error_vs_density.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 6.80in,4.22in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2040,1266 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'error_vs_density.'.fmt
set multiplot
set logscale xy
set xrange [0.02:1]
set xtics (0.02, 0.05, 0.1, 0.2, 0.5, 1)
set mxtics default
set mytics default
set offsets graph 0.06, graph 0.06, 0, 0
set xlabel 'computed density {/:Italic ρ} (targets 0.05, 0.1, 0.15, 0.25, 0.5)' offset 0,0.3
set ylabel 'relative L_2 error (mean)'
set lmargin at screen 0.0882
set rmargin at screen 0.4824
set bmargin at screen 0.5427
set tmargin at screen 0.9336
set key at screen 0.0662, screen 0.4431 left top vertical maxrows 2 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.01:2]
set ytics (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)
set title '(a) oracle ladder (refresh=step)' noenhanced
plot 'error_vs_density.dat' index 0 using ($1*0.9632):2:3:4 with yerrorlines ls 1 title 'est-block' noenhanced, \
	'error_vs_density.dat' index 1 using ($1*0.9778):2:3:4 with yerrorlines ls 2 title 'oracle-block' noenhanced, \
	'error_vs_density.dat' index 2 using ($1*0.9925):2:3:4 with yerrorlines ls 3 title 'oracle-tile' noenhanced, \
	'error_vs_density.dat' index 3 using ($1*1.0075):2:3:4 with yerrorlines ls 4 title 'oracle-pca' noenhanced, \
	'error_vs_density.dat' index 4 using ($1*1.0228):2:3:4 with yerrorlines ls 5 title 'oracle' noenhanced, \
	'error_vs_density.dat' index 5 using ($1*1.0382):2:3:4 with yerrorlines ls 6 title 'oracle+res' noenhanced
set lmargin at screen 0.5882
set rmargin at screen 0.9824
set bmargin at screen 0.5427
set tmargin at screen 0.9336
set key at screen 0.5662, screen 0.4431 left top vertical maxrows 14 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.02:2]
set ytics (0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)
set title '(b) other policies' noenhanced
plot 'error_vs_density.dat' index 6 using ($1*0.9512):2:3:4 with yerrorlines ls 1 title 'xattention/budget=topk' noenhanced, \
	'error_vs_density.dat' index 7 using ($1*0.9586):2:3:4 with yerrorlines ls 2 title 'spargeattn/theta=-0.1/budget=topk' noenhanced, \
	'error_vs_density.dat' index 8 using ($1*0.9660):2:3:4 with yerrorlines ls 3 title 'svg2/budget=topk' noenhanced, \
	'error_vs_density.dat' index 9 using ($1*0.9734):2:3:4 with yerrorlines ls 4 title 'chipmunk' noenhanced, \
	'error_vs_density.dat' index 10 using ($1*0.9810):2:3:4 with yerrorlines ls 5 title 'pisa' noenhanced, \
	'error_vs_density.dat' index 11 using ($1*0.9885):2:3:4 with yerrorlines ls 6 title 'ditfastattn' noenhanced, \
	'error_vs_density.dat' index 12 using ($1*0.9962):2:3:4 with yerrorlines ls 7 title 'ditfastattn/window=130' noenhanced, \
	'error_vs_density.dat' index 13 using ($1*1.0039):2:3:4 with yerrorlines ls 8 title 'ditfastattn/window=197' noenhanced, \
	'error_vs_density.dat' index 14 using ($1*1.0116):2:3:4 with yerrorlines ls 9 title 'ditfastattn/window=335' noenhanced, \
	'error_vs_density.dat' index 15 using ($1*1.0194):2:3:4 with yerrorlines ls 10 title 'ditfastattn/window=750' noenhanced, \
	'error_vs_density.dat' index 16 using ($1*1.0273):2:3:4 with yerrorlines ls 11 title 'sta/window=1' noenhanced, \
	'error_vs_density.dat' index 17 using ($1*1.0352):2:3:4 with yerrorlines ls 12 title 'sta/window=2' noenhanced, \
	'error_vs_density.dat' index 18 using ($1*1.0432):2:3:4 with yerrorlines ls 13 title 'sta' noenhanced, \
	'error_vs_density.dat' index 19 using ($1*1.0513):2:3:4 with yerrorlines ls 14 title 'radial' noenhanced
unset multiplot
unset output
}
