# sources_per_layer.gp: sources of the dense-sparse gap per layer, stacked to E(est-block)
# made by dsgap plot (dsgap 0.1.0, commit f8a53d540665+wip) from /work/main/build/experiments/ladder/bundled.w2
# trace /work/main/experiments/../build/experiments/bundled.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source /work/main/data/model/diffusion_pytorch_model.safetensors); metrics by commit f8a53d540665+wip on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-02T17:37:40Z
# re-render inside this directory: gnuplot sources_per_layer.gp   (writes sources_per_layer.pdf and sources_per_layer.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.40in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,720 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'sources_per_layer.'.fmt
set xtics ("0" 0, "3" 1, "7" 2, "all" 4)
set xrange [-0.7:4.7]
set arrow from 3, graph 0 to 3, graph 1 nohead dt 2 lc rgb '#999999'
set xlabel 'layer'
set ylabel 'relative L_2 error (mean)'
set title 'target density {/:Italic ρ} = 0.15'
set key outside top center horizontal maxrows 2 Left reverse samplen 1 font ',7'
set style fill solid 0.85 noborder
set xzeroaxis lt -1 lw 0.5
f = 'sources_per_layer.dat'
plot f using 1:($3/2):($1-0.4):($1+0.4):(0):3 with boxxyerror ls 3 title 'lost contributions', \
	f using 1:3:($1-0.4):($1+0.4):3:($3+$4) with boxxyerror ls 2 title 'grouping', \
	f using 1:3:($1-0.4):($1+0.4):($3+$4):($3+$4+$5) with boxxyerror ls 1 title 'selection', \
	f using 1:7:(0):($8-$7) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 title '95% CI of E(est-block)'
unset output
}
