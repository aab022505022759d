# sources_per_layer-rho0.15.gp: sources of the dense-sparse gap per layer, diverging stacks (their sum: E(est-block), the black point)
# made by dsgap plot (dsgap 0.1.0, commit 9f4f1df65f81+wip) from results/ladder
# trace synth: grid=5x16x32 heads=4 layers=3 steps=6 head_dim=64 seed=1 (model synthetic, source synthetic); metrics by commit 5b9c0841ebfd on cpu: AMD EPYC (2 threads), 2026-12-03T19:09:21Z
# re-render inside this directory: gnuplot sources_per_layer-rho0.15.gp   (writes sources_per_layer-rho0.15.pdf and sources_per_layer-rho0.15.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.65in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,795 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'sources_per_layer-rho0.15.'.fmt
set xtics ("0" 0, "1" 1, "2" 2, "all" 4)
set xrange [-0.7:4.7]
set yrange [0:1.33593]
set arrow from 3, graph 0 to 3, graph 1 nohead dt 2 lc rgb '#999999'
set xlabel 'layer'
set ylabel 'relative L_2 error (mean)'
set title 'target density {/:Italic ρ} = 0.15, computed 0.15 (est-block)'
set key outside top center horizontal maxrows 2 Left reverse samplen 1 font ',7'
set style fill solid 0.85 noborder
set xzeroaxis lt -1 lw 1
f = 'sources_per_layer-rho0.15.dat'
plot f using 1:(($3+$4)/2):($1-0.4):($1+0.4):3:4 with boxxyerror ls ls_lost title 'lost contributions', \
	f using 1:(($5+$6)/2):($1-0.4):($1+0.4):5:6 with boxxyerror ls ls_grouping title 'grouping', \
	f using 1:(($7+$8)/2):($1-0.4):($1+0.4):7:8 with boxxyerror ls ls_selection title 'selection', \
	f using 1:9:10:11 with yerrorbars pt 7 ps 0.6 lc rgb '#000000' lw 1 title 'E(est-block) = sum (95% CI)'
unset output
}
