# sources_per_layer-rho0.15.gp: sources of the dense-sparse gap per layer, diverging stacks (their sum: E(est-block), the black point)
# made by dsgap plot (dsgap 0.1.0, commit 1d94d6fbbe68) from dsgap-demo
# trace dsgap-demo/trace.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source diffusion_pytorch_model.safetensors); metrics by commit 1d94d6fbbe68 on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-05T11:39:41Z
# re-render inside this directory: gnuplot sources_per_layer-rho0.15.gp   (writes sources_per_layer-rho0.15.pdf and sources_per_layer-rho0.15.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.65in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,795 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'sources_per_layer-rho0.15.'.fmt
set xtics ("0" 0, "3" 1, "7" 2, "all" 4)
set xrange [-0.7:4.7]
set yrange [0:0.91264]
set arrow from 3, graph 0 to 3, graph 1 nohead dt 2 lc rgb '#999999'
set xlabel 'layer'
set ylabel 'relative L_2 error (mean)'
set title 'target density {/:Italic ρ} = 0.15, computed 0.156 (est-block)'
set key outside top center horizontal maxrows 2 Left reverse samplen 1 font ',7'
set style fill solid 0.85 noborder
set xzeroaxis lt -1 lw 1
f = 'sources_per_layer-rho0.15.dat'
plot f using 1:(($3+$4)/2):($1-0.4):($1+0.4):3:4 with boxxyerror ls 3 title 'lost contributions', \
	f using 1:(($5+$6)/2):($1-0.4):($1+0.4):5:6 with boxxyerror ls 2 title 'grouping', \
	f using 1:(($7+$8)/2):($1-0.4):($1+0.4):7:8 with boxxyerror ls 1 title 'selection', \
	f using 1:9:10:11 with yerrorbars pt 7 ps 0.6 lc rgb '#000000' lw 1 title 'E(est-block) = sum (95% CI)'
unset output
}
