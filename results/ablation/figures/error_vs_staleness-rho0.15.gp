# error_vs_staleness-rho0.15.gp: mean rel_l2 against steps since the anchor
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ablation
# trace synth: grid=5x16x32 heads=4 layers=4 steps=10 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:13:23Z
# re-render inside this directory: gnuplot error_vs_staleness-rho0.15.gp   (writes error_vs_staleness-rho0.15.pdf and error_vs_staleness-rho0.15.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,3.18in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,953 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'error_vs_staleness-rho0.15.'.fmt
set lmargin at screen 0.1765
set rmargin at screen 0.9647
set bmargin at screen 0.3931
set tmargin at screen 0.9119
set key at screen 0.1324, screen 0.2610 left top vertical maxrows 6 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.02:1]
set ytics (0.02, 0.05, 0.1, 0.2, 0.5, 1)
set logscale y
set mytics default
set xtics 1
set mxtics 1
set offsets graph 0.04, graph 0.04, 0, 0
set xlabel 'steps since the anchor' offset 0,0.3
set ylabel 'relative L_2 error (mean)'
set title 'target density {/:Italic ρ} = 0.15, computed 0.15'
plot 'error_vs_staleness-rho0.15.dat' index 0 using ($1-0.220):2:3:4 with yerrorlines ls 1 title 'baseline' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 1 using ($1-0.180):2:3:4 with yerrorlines ls 2 title 'mc-grouping' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 2 using ($1-0.140):2:3:4 with yerrorlines ls 3 title 'mc-selection' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 3 using ($1-0.100):2:3:4 with yerrorlines ls 4 title 'mc-residual' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 4 using ($1-0.060):2:3:4 with yerrorlines ls 5 title 'mc-gs' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 5 using ($1-0.020):2:3:4 with yerrorlines ls 6 title 'mc-gr' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 6 using ($1+0.020):2:3:4 with yerrorlines ls 7 title 'mc-sr' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 7 using ($1+0.060):2:3:4 with yerrorlines ls 8 title 'mc-sparse' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 8 using ($1+0.100):2:3:4 with yerrorlines ls 12 title 'chipmunk' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 9 using ($1+0.140):2:3:4 with yerrorlines ls 14 title 'ditfastattn/window=130' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 10 using ($1+0.180):2:3:4 with yerrorlines ls 15 title 'ditfastattn/window=197' noenhanced, \
	'error_vs_staleness-rho0.15.dat' index 11 using ($1+0.220):2:3:4 with yerrorlines ls 16 title 'ditfastattn/window=335' noenhanced
unset output
}
