# samples-rho0.15.gp: per-sample sources (ladder) and Shapley shares (factorial) at density_target 0.15
# made by dsgap plot (dsgap 0.1.0, commit dbbc72629149+wip); re-render inside this directory: gnuplot samples-rho0.15.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") {
	set terminal pdfcairo size 7.00in,5.95in font 'Liberation Sans,8'
} else {
	set terminal pngcairo size 2100,1785 font 'Liberation Sans,8' fontscale 3 linewidth 2
}
set output 'samples-rho0.15.'.fmt
set multiplot title 'per sample at target density {/:Italic ρ} = 0.15 (computed 0.156): each sample alone; top row: all samples pooled with the two-level 95% interval'
set tmargin at screen 0.908; set bmargin at screen 0.126
set yrange [25 - 0.5:-0.5]
set grid xtics noytics
set arrow from 0, graph 0 to 0, graph 1 nohead lc rgb '#000000' lw 1
f = 'samples-rho0.15.dat'
set ytics nomirror font ',7' noenhanced ()
set xtics nomirror 0.05
set lmargin at screen 0.16; set rmargin at screen 0.55
set title '(a) sources of the gap (oracle ladder)'
set key at screen 0.355, screen 0.01 center bottom horizontal maxcols 3 Left reverse width -1 font ',7' samplen 1
set xlabel 'relative L_2 error'
plot f using 3:($1-0.2):9:10:ytic(stringcolumn(2)) with xerrorbars ls ls_selection pt 7 ps 0.7 title 'selection', \
	 f using 4:($1+0.0):11:12 with xerrorbars ls ls_grouping pt 5 ps 0.7 title 'grouping', \
	 f using 5:($1+0.2):13:14 with xerrorbars ls ls_lost pt 9 ps 0.7 title 'lost contributions'
unset ytics
set xtics nomirror 0.05
set lmargin at screen 0.60; set rmargin at screen 0.98
set title '(b) Shapley shares (factorial; positive = error reduced)'
set key at screen 0.790, screen 0.01 center bottom horizontal maxcols 3 Left reverse width -1 font ',7' samplen 1
set xlabel 'error reduction'
plot f using 6:($1-0.2):15:16 with xerrorbars ls ls_grouping pt 7 ps 0.7 title '{/:Italic φ}_G grouping', \
	 f using 7:($1+0.0):17:18 with xerrorbars ls ls_selection pt 5 ps 0.7 title '{/:Italic φ}_S selection', \
	 f using 8:($1+0.2):19:20 with xerrorbars ls ls_lost pt 9 ps 0.7 title '{/:Italic φ}_R residual'
unset multiplot
unset output
}
