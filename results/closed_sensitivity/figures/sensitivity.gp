# sensitivity.gp: re-render inside this directory: gnuplot sensitivity.gp
load 'style.gp'
do for [fmt in "pdf png"] {
if (fmt eq "pdf") { set terminal pdfcairo size 4.6in,2.8in font 'Liberation Sans,8' } else { set terminal pngcairo size 1380,840 font 'Liberation Sans,8' fontscale 2.5 linewidth 2 }
set output 'sensitivity.'.fmt
set title "final PSNR (dB) against dense, mean over the samples:\nsparse attention only in the column's steps or layer, dense elsewhere" noenhanced
unset grid
set datafile separator whitespace
set view map
set palette defined (0 '#B2182B', 0.5 '#F7F7F7', 1 '#2166AC')
set cblabel 'PSNR (dB)'
set xtics rotate by 30 right noenhanced
set ytics noenhanced
set xrange [-0.5:12.5]
set yrange [-0.5:1.5]
plot 'sensitivity.dat' matrix rowheaders columnheaders using 1:2:3 with image notitle, '' matrix rowheaders columnheaders using 1:2:(sprintf('%.1f', $3)) with labels font ',7' notitle
unset output
}
