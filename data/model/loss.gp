# loss.gp: training loss of the bundled model (gnuplot loss.gp -> loss.png, loss.pdf)
if (system("test -f ../../analysis/style.gp && echo 1") eq "1") load "../../analysis/style.gp"
set xlabel "step"
set ylabel "rectified-flow loss (MSE of v)"
set logscale y
set title "Wan2.1-architecture pixel DiT, 8 layers x 2 heads x 128, 9.1M params: 2845 steps, 15.0 min" font ",10"
set key top right
do for [fmt in "png pdf"] {
  if (fmt eq "png") { set terminal pngcairo size 900,540 font "Sans,10" } else { set terminal pdfcairo size 6in,3.6in font "Sans,9" }
  set output "loss.".fmt
  plot "loss.dat" index 0 using 1:3 with lines lc rgb "#c8c8c8" lw 0.6 title "loss per step", \
       "" index 0 using 1:4 with lines ls 1 title "smoothed (EMA 0.98)", \
       "" index 1 using 1:3 with linespoints ls 2 title "held-out clips (fixed noise, sigma)"
  set output
}
