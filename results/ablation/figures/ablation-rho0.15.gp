# ablation-rho0.15.gp: E of the MC-Sparse factorial cells with 95% intervals
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ablation
# trace synth: grid=5x16x32 heads=4 layers=4 steps=10 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:13:23Z
# re-render inside this directory: gnuplot ablation-rho0.15.gp   (writes ablation-rho0.15.pdf and ablation-rho0.15.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.40in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,720 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'ablation-rho0.15.'.fmt
set xrange [-0.6:7.6]
set yrange [0:*]
set boxwidth 0.7
set style fill solid 0.85 noborder
set grid noxtics
set xlabel 'components on (G: grouping, S: selection, R: residual)'
set ylabel 'relative L_2 error (mean)'
set title 'target density {/:Italic ρ} = 0.15, computed 0.15'
f = 'ablation-rho0.15.dat'
plot f using 1:4:xtic(2) with boxes ls 9 notitle, \
	f using 1:5:(0):($6-$5) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset output
}
