# mass_distribution.gp: distribution over units of the retained attention mass
# made by dsgap plot (dsgap 0.1.0, commit f8a53d540665+wip) from /work/main/build/experiments/ladder/bundled.w2
# trace /work/main/experiments/../build/experiments/bundled.h5 (model wan2.1-t2v dim 256, 8 layers, 2 heads of 128 (original layout), source /work/main/data/model/diffusion_pytorch_model.safetensors); metrics by commit f8a53d540665+wip on cpu: Intel(R) Xeon(R) Processor (2 threads), 2026-12-02T17:37:40Z
# re-render inside this directory: gnuplot mass_distribution.gp   (writes mass_distribution.pdf and mass_distribution.png)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 6.80in,4.22in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2040,1266 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'mass_distribution.'.fmt
set multiplot
set yrange [0:1]
set xlabel 'retained mass (mean over queries)' offset 0,0.3
set ylabel 'fraction of units'
set lmargin at screen 0.0882
set rmargin at screen 0.4824
set bmargin at screen 0.5427
set tmargin at screen 0.9336
set key at screen 0.0662, screen 0.4431 left top vertical maxrows 3 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0.2:1]
set xtics 0.2
set title '(a) oracle ladder, {/:Italic ρ} = 0.15'
plot 'mass_distribution.dat' index 0 using 1:2 with lines ls 1 title 'est-block' noenhanced, \
	'mass_distribution.dat' index 1 using 1:2 with lines ls 2 title 'oracle-block' noenhanced, \
	'mass_distribution.dat' index 2 using 1:2 with lines ls 3 title 'oracle-tile' noenhanced, \
	'mass_distribution.dat' index 3 using 1:2 with lines ls 4 title 'oracle-pca' noenhanced, \
	'mass_distribution.dat' index 4 using 1:2 with lines ls 5 title 'oracle' noenhanced, \
	'mass_distribution.dat' index 5 using 1:2 with lines ls 6 dt (4,4) title 'oracle+res = oracle' noenhanced
set lmargin at screen 0.5882
set rmargin at screen 0.9824
set bmargin at screen 0.5427
set tmargin at screen 0.9336
set key at screen 0.5662, screen 0.4431 left top vertical maxrows 14 Left reverse samplen 1.5 width -2 font ',7'
set xrange [0:1]
set xtics 0.2
set title '(b) other policies, {/:Italic ρ} = 0.15'
plot 'mass_distribution.dat' index 6 using 1:2 with lines ls 1 title 'xattention/budget=topk' noenhanced, \
	'mass_distribution.dat' index 7 using 1:2 with lines ls 2 title 'spargeattn/theta=-0.1/budget=topk' noenhanced, \
	'mass_distribution.dat' index 8 using 1:2 with lines ls 3 title 'svg2/budget=topk' noenhanced, \
	'mass_distribution.dat' index 9 using 1:2 with lines ls 4 title 'chipmunk' noenhanced, \
	'mass_distribution.dat' index 10 using 1:2 with lines ls 5 title 'pisa' noenhanced, \
	'mass_distribution.dat' index 11 using 1:2 with lines ls 6 title 'ditfastattn' noenhanced, \
	'mass_distribution.dat' index 12 using 1:2 with lines ls 7 title 'ditfastattn/window=130' noenhanced, \
	'mass_distribution.dat' index 13 using 1:2 with lines ls 8 title 'ditfastattn/window=197' noenhanced, \
	'mass_distribution.dat' index 14 using 1:2 with lines ls 9 title 'ditfastattn/window=335' noenhanced, \
	'mass_distribution.dat' index 15 using 1:2 with lines ls 10 title 'ditfastattn/window=750' noenhanced, \
	'mass_distribution.dat' index 16 using 1:2 with lines ls 11 title 'sta/window=1' noenhanced, \
	'mass_distribution.dat' index 17 using 1:2 with lines ls 12 title 'sta/window=2' noenhanced, \
	'mass_distribution.dat' index 18 using 1:2 with lines ls 13 title 'sta' noenhanced, \
	'mass_distribution.dat' index 19 using 1:2 with lines ls 14 title 'radial' noenhanced
unset multiplot
unset output
}
