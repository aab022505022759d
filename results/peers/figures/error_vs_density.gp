load 'style.gp'
set terminal pngcairo size 900,600; set output 'error_vs_density.png'
set title 'peers vs MC-Sparse (synthetic trace): error against effective density'
set xlabel 'effective density'; set ylabel 'mean rel\_l2 (post-warm-up)'; set logscale y
set key outside right
plot 'peers_baseline.dat' using 1:2 with linespoints title 'baseline', 'peers_chipmunk.dat' using 1:2 with linespoints title 'chipmunk', 'peers_dense.dat' using 1:2 with linespoints title 'dense', 'peers_ditfastattn.dat' using 1:2 with linespoints title 'ditfastattn', 'peers_mc-sparse.dat' using 1:2 with linespoints title 'mc-sparse', 'peers_pisa.dat' using 1:2 with linespoints title 'pisa', 'peers_radial.dat' using 1:2 with linespoints title 'radial', 'peers_spargeattn.dat' using 1:2 with linespoints title 'spargeattn', 'peers_spargeattn_theta_-0.1_budget_topk.dat' using 1:2 with linespoints title 'spargeattn_theta_-0.1_budget_topk', 'peers_sta.dat' using 1:2 with linespoints title 'sta', 'peers_svg2.dat' using 1:2 with linespoints title 'svg2', 'peers_svg2_budget_topk.dat' using 1:2 with linespoints title 'svg2_budget_topk', 'peers_xattention.dat' using 1:2 with linespoints title 'xattention', 'peers_xattention_budget_topk.dat' using 1:2 with linespoints title 'xattention_budget_topk'
set terminal pdfcairo; set output 'error_vs_density.pdf'; replot
