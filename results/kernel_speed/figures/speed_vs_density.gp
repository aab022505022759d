# speed_vs_density.gp: attention speedup over cuDNN SDPA dense vs density (NVIDIA H200 | 2026-12-02T14:48:53Z | commit 1ead4dd+wip)
# made by experiments/kernel_speed.sh; re-render inside this directory: gnuplot speed_vs_density.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 3.4in,2.9in font 'Liberation Sans,8' } else { set terminal pngcairo size 1020,870 font 'Liberation Sans,8' fontscale 3 linewidth 2 }
set output 'speed_vs_density.'.fmt
set title 'attention speed vs density (H200, bf16, d=128, N=32760)'
set xtics (0.05, 0.1, 0.2, 0.3, 0.5)
set xlabel "target density {/:Italic ρ}\ncomputed K/N: 0.0508, 0.102, 0.152, 0.203, 0.301, 0.5"
set ylabel 'speedup over cuDNN dense'
set logscale xy
set xrange [0.04:0.6]
set yrange [0.7:30]
set bmargin 9
set key at screen 0.5, screen 0.01 center bottom vertical Left reverse samplen 1.5 font ',7'
plot 'speed_vs_density.dat' using 1:2 with lines ls 9 dt 2 title 'ideal N/K', \
  '' using 1:3 with linespoints ls 1 title 'ours: gather-KV sparse', \
  '' using 1:4 with linespoints ls 2 title 'FlexAttention block-sparse', \
  1 with lines ls 8 lw 1 dt 3 title 'cuDNN dense'
unset output
}
