# shapley.gp: Shapley shares of G, S, R per density with 95% intervals
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ablation
# trace synth: grid=5x16x32 heads=4 layers=4 steps=10 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:13:23Z
# re-render inside this directory: gnuplot shapley.gp   (writes shapley.pdf and shapley.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.40in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,720 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'shapley.'.fmt
set xtics ("0.1\n(0.1)" 0, "0.15\n(0.15)" 1, "0.25\n(0.25)" 2)
set xlabel 'target density {/:Italic ρ} (computed below it)' offset 0,-0.7
set bmargin 4.2
set xrange [-0.6:2.6]
set boxwidth 0.24
set style fill solid 0.85 noborder
set grid noxtics
set xzeroaxis lt -1 lw 0.5
set yrange [*<0:0<*]
set ylabel 'error reduction (rel. L_2)'
set key outside top center horizontal maxrows 2 Left reverse samplen 1 font ',7'
f = 'shapley.dat'
titles = "'{/:Italic φ}_G grouping' '{/:Italic φ}_S selection' '{/:Italic φ}_R residual'"
src(k) = k == 0 ? ls_grouping : k == 1 ? ls_selection : ls_lost
plot for [k=0:2] f using ($1+(k-1)*0.26):(column(3+3*k)) with boxes ls src(k) title word(titles, k+1), \
	for [k=0:2] f using ($1+(k-1)*0.26):(column(4+3*k)):(0):(column(5+3*k)-column(4+3*k)) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset output
}
