# closed_loop.gp: PSNR, SSIM and transformer speedup per policy, means over the samples with 95% intervals
# made by experiments/closed_loop_fig.sh; re-render inside this directory: gnuplot closed_loop.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 7in,2.50in font 'Liberation Sans,8' } else { set terminal pngcairo size 2100,750 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'closed_loop.'.fmt
set multiplot title "closed loop, model bundled, against the dense run of the same prompt and noise: means over 4 samples (prompt x seed)\nwith 95% bootstrap intervals over the samples; rows: policy @ target density (computed density)" noenhanced font ',8'
set tmargin at screen 0.832; set bmargin at screen 0.180
set yrange [10 - 0.5:-0.5]
set key off
set grid xtics noytics
f = 'closed_loop.dat'
set ytics () font ',7' noenhanced
set lmargin at screen 0.34; set rmargin at screen 0.53
set xlabel 'PSNR (dB)'
set xtics autofreq
set ytics () font ',7' noenhanced format '% h'
plot f using 5:1:6:7:(int($1) % 15 + 1):ytic(sprintf('%s (%.3g)', stringcolumn(2), $3)) with xerrorbars lc variable pt 7 ps 0.8
set ytics format ''
set lmargin at screen 0.56; set rmargin at screen 0.75
set xlabel 'SSIM'
set xtics 0.2
plot f using 8:1:9:10:(int($1) % 15 + 1) with xerrorbars lc variable pt 7 ps 0.8
set lmargin at screen 0.78; set rmargin at screen 0.97
set xlabel 'transformer speedup over dense'
set xtics 0.5
plot f using 11:1:12:13:(int($1) % 15 + 1) with xerrorbars lc variable pt 7 ps 0.8
unset multiplot
unset output
}
