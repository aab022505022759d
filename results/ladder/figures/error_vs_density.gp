# error_vs_density.gp: mean rel_l2 against target density, per policy
# made by dsgap plot (dsgap 0.1.0, commit 6ce75697026a) from /work/main/build/experiments/ladder/synthetic.w2
# trace synth: grid=5x16x32 heads=4 layers=3 steps=6 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 6ce75697026a on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-02T15:15:51Z
# re-render inside this directory: gnuplot error_vs_density.gp   (writes error_vs_density.pdf and error_vs_density.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.66in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,798 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'error_vs_density.'.fmt
set multiplot
set logscale xy
set autoscale xfix
set xtics (0.05, 0.1, 0.15, 0.25, 0.5)
set mxtics default
set mytics default
set offsets graph 0.06, graph 0.06, 0, 0
set xlabel 'target density {/:Italic ρ}' offset 0,0.3
set ylabel 'relative L_2 error (mean)'
set lmargin at screen 0.1765
set rmargin at screen 0.9647
set bmargin at screen 0.2744
set tmargin at screen 0.8947
set key at screen 0.1324, screen 0.1165 left top vertical maxrows 2 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.01:2]
set ytics (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)
set title '(a) oracle ladder (refresh=step)' noenhanced
plot 'error_vs_density.dat' index 0 using ($1*0.9632):2:3:4 with yerrorlines ls 1 title 'est-block' noenhanced, \
	'error_vs_density.dat' index 1 using ($1*0.9778):2:3:4 with yerrorlines ls 2 title 'oracle-block' noenhanced, \
	'error_vs_density.dat' index 2 using ($1*0.9925):2:3:4 with yerrorlines ls 3 title 'oracle-tile' noenhanced, \
	'error_vs_density.dat' index 3 using ($1*1.0075):2:3:4 with yerrorlines ls 4 title 'oracle-pca' noenhanced, \
	'error_vs_density.dat' index 4 using ($1*1.0228):2:3:4 with yerrorlines ls 5 title 'oracle' noenhanced, \
	'error_vs_density.dat' index 5 using ($1*1.0382):2:3:4 with yerrorlines ls 6 title 'oracle+res' noenhanced
unset multiplot
unset output
}
