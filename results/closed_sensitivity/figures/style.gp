# style.gp: the shared style of every dsgap figure (loaded by each generated .gp).
# Colour-blind-safe palette (Okabe-Ito), thin grid, fonts that pdfcairo and pngcairo both have.
set style line 1 lc rgb '#0072B2' lw 2 pt 7 ps 0.8
set style line 2 lc rgb '#D55E00' lw 2 pt 5 ps 0.8
set style line 3 lc rgb '#009E73' lw 2 pt 9 ps 0.9
set style line 4 lc rgb '#CC79A7' lw 2 pt 11 ps 0.9
set style line 5 lc rgb '#E69F00' lw 2 pt 13 ps 0.9
set style line 6 lc rgb '#56B4E9' lw 2 pt 15 ps 0.9
set style line 7 lc rgb '#F0E442' lw 2 pt 4 ps 0.9
set style line 8 lc rgb '#000000' lw 2 pt 6 ps 0.9
set style line 9 lc rgb '#999999' lw 2 pt 8 ps 0.9
set style line 10 lc rgb '#882255' lw 2 pt 10 ps 0.9
set style line 11 lc rgb '#44AA99' lw 2 pt 12 ps 0.9
set style line 12 lc rgb '#332288' lw 2 pt 14 ps 0.9
set style line 13 lc rgb '#117733' lw 2 pt 2 ps 0.9
set style line 14 lc rgb '#AA4499' lw 2 pt 3 ps 0.9
set style line 15 lc rgb '#DDCC77' lw 2 pt 1 ps 0.9
set style line 100 lc rgb '#d0d0d0' lw 0.5 dt 3
# One colour per source of the gap, the same in every figure (issue 49): a figure draws a source
# with `ls ls_SOURCE`, never with a style number of its own. The factorial's components are the
# sources they repair: G grouping, S selection, R (the residual) lost contributions.
set style line 21 lc rgb '#0072B2' lw 2 pt 7 ps 0.8
set style line 22 lc rgb '#D55E00' lw 2 pt 5 ps 0.8
set style line 23 lc rgb '#009E73' lw 2 pt 9 ps 0.9
set style line 24 lc rgb '#CC79A7' lw 2 pt 11 ps 0.9
set style line 25 lc rgb '#E69F00' lw 2 pt 13 ps 0.9
set style line 26 lc rgb '#56B4E9' lw 2 pt 15 ps 0.9
ls_selection = 21
ls_grouping = 22
ls_lost = 23
ls_staleness = 24
ls_query_grouping = 25
ls_key_blocking = 26
set grid back ls 100
set border 3 lw 1
set tics nomirror out scale 0.6
set key top right noopaque samplen 2 spacing 1.1 font ',9'
set style increment user
set datafile separator whitespace
set datafile missing 'nan'
