# attnstats-rho0.15.gp: entropy and oracle mass per layer and head (gnuplot attnstats-rho0.15.gp)
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 6.5in,2.6in font 'Liberation Sans,8' } else { set terminal pngcairo size 1950,780 font 'Liberation Sans,8' fontscale 2.5 linewidth 2 }
set output 'attnstats-rho0.15.'.fmt
set multiplot layout 1,2 title "24 samples, means with two-level bootstrap 95% intervals"
set xlabel 'layer (heads side by side)'
set xrange [-0.5:7.5]
set xtics (0, 3, 7)
unset key
set title '(a) row entropy'
set ylabel 'row entropy / ln N'
set yrange [0:1.05]
plot 'attnstats-rho0.15.dat' index 0 using ($1-0.1125+0.075*(2*$2+0)):3:4:5 with yerrorbars ls 1 notitle, 'attnstats-rho0.15.dat' index 1 using ($1-0.1125+0.075*(2*$2+1)):3:4:5 with yerrorbars ls 2 notitle
set key outside right center vertical noenhanced
set title '(b) retained mass of the per-query oracle'
set ylabel 'oracle mass at density 0.15 (computed K/N 0.156)'
set yrange [0:1.05]
plot 'attnstats-rho0.15.dat' index 0 using ($1-0.1125+0.075*(2*$2+0)):6:7:8 with yerrorbars ls 1 title 'learned', 'attnstats-rho0.15.dat' index 1 using ($1-0.1125+0.075*(2*$2+1)):6:7:8 with yerrorbars ls 2 title 'random', 0.15625 with lines dt 2 lc rgb 'gray' title 'uniform rows'
unset multiplot
set output
}
