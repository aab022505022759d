# error_vs_density.gp: mean rel_l2 against the computed density, per policy
# made by dsgap plot (dsgap 0.1.0, commit 1d94d6fbbe68) from dsgap-demo
# trace dsgap-demo/trace.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source diffusion_pytorch_model.safetensors); metrics by commit 1d94d6fbbe68 on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-05T11:39:41Z
# re-render inside this directory: gnuplot error_vs_density.gp   (writes error_vs_density.pdf and error_vs_density.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 6.80in,2.79in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2040,837 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'error_vs_density.'.fmt
set multiplot
set logscale xy
set xrange [0.1:0.5]
set xtics (0.1, 0.2, 0.5)
set mxtics default
set mytics default
set offsets graph 0.06, graph 0.06, 0, 0
set xlabel 'computed density {/:Italic ρ} (targets 0.1, 0.15, 0.25)' offset 0,0.3
set ylabel 'relative L_2 error (mean)'
set lmargin at screen 0.0882
set rmargin at screen 0.4824
set bmargin at screen 0.3082
set tmargin at screen 0.8996
set key at screen 0.0662, screen 0.1577 left top vertical maxrows 2 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.005:1]
set ytics (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1)
set title '(a) oracle ladder (refresh=step)' noenhanced
plot 'error_vs_density.dat' index 0 using ($1*0.9632):2:3:4 with yerrorlines ls 1 title 'est-block' noenhanced, \
	'error_vs_density.dat' index 1 using ($1*0.9778):2:3:4 with yerrorlines ls 2 title 'oracle-block' noenhanced, \
	'error_vs_density.dat' index 2 using ($1*0.9925):2:3:4 with yerrorlines ls 3 title 'oracle-tile' noenhanced, \
	'error_vs_density.dat' index 3 using ($1*1.0075):2:3:4 with yerrorlines ls 4 title 'oracle-pca' noenhanced, \
	'error_vs_density.dat' index 4 using ($1*1.0228):2:3:4 with yerrorlines ls 5 title 'oracle' noenhanced, \
	'error_vs_density.dat' index 5 using ($1*1.0382):2:3:4 with yerrorlines ls 6 title 'oracle+res' noenhanced
set lmargin at screen 0.5882
set rmargin at screen 0.9824
set bmargin at screen 0.3082
set tmargin at screen 0.8996
set key at screen 0.5662, screen 0.1577 left top vertical maxrows 3 Left reverse samplen 1.5 width -2 font ',7'
set yrange [0.02:1]
set ytics (0.02, 0.05, 0.1, 0.2, 0.5, 1)
set title '(b) MC-Sparse factorial (refresh=anchor)' noenhanced
plot 'error_vs_density.dat' index 6 using ($1*0.9512):2:3:4 with yerrorlines ls 1 title 'baseline' noenhanced, \
	'error_vs_density.dat' index 7 using ($1*0.9649):2:3:4 with yerrorlines ls 2 title 'mc-grouping' noenhanced, \
	'error_vs_density.dat' index 8 using ($1*0.9788):2:3:4 with yerrorlines ls 3 title 'mc-selection' noenhanced, \
	'error_vs_density.dat' index 9 using ($1*0.9929):2:3:4 with yerrorlines ls 4 title 'mc-residual' noenhanced, \
	'error_vs_density.dat' index 10 using ($1*1.0072):2:3:4 with yerrorlines ls 5 title 'mc-gs' noenhanced, \
	'error_vs_density.dat' index 11 using ($1*1.0217):2:3:4 with yerrorlines ls 6 title 'mc-gr' noenhanced, \
	'error_vs_density.dat' index 12 using ($1*1.0364):2:3:4 with yerrorlines ls 7 title 'mc-sr' noenhanced, \
	'error_vs_density.dat' index 13 using ($1*1.0513):2:3:4 with yerrorlines ls 8 title 'mc-sparse' noenhanced
unset multiplot
unset output
}
