# ablation-rho0.15.gp: E of the MC-Sparse factorial cells with 95% intervals
# made by dsgap plot (dsgap 0.1.0, commit 1d94d6fbbe68) from dsgap-demo
# trace dsgap-demo/trace.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source diffusion_pytorch_model.safetensors); metrics by commit 1d94d6fbbe68 on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-05T11:39:41Z
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
set title 'target density {/:Italic ρ} = 0.15, computed 0.156'
f = 'ablation-rho0.15.dat'
plot f using 1:4:xtic(2) with boxes ls 1 notitle, \
	f using 1:5:(0):($6-$5) with vectors heads size screen 0.006,90 lc rgb '#000000' lw 1 notitle
unset output
}
