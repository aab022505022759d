# shapley.gp: Shapley shares of G, S, R per density with 95% intervals
# made by dsgap plot (dsgap 0.1.0, commit 1d94d6fbbe68) from dsgap-demo
# trace dsgap-demo/trace.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source diffusion_pytorch_model.safetensors); metrics by commit 1d94d6fbbe68 on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-05T11:39:41Z
# re-render inside this directory: gnuplot shapley.gp   (writes shapley.pdf and shapley.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 3.40in,2.40in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 1020,720 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'shapley.'.fmt
set xtics ("0.1\n(0.125)" 0, "0.15\n(0.156)" 1, "0.25\n(0.25)" 2)
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
titles = "'G: grouping' 'S: selection' 'R: residual'"
plot for [k=0:2] f using ($1+(k-1)*0.26):(column(3+3*k)) with boxes ls k+1 title word(titles, k+1), \
	for [k=0:2] f using ($1+(k-1)*0.26):(column(4+3*k)):(0):(column(5+3*k)-column(4+3*k)) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset output
}
