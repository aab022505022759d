# tests/samples.cmake: dsgap decompose over a sample set (issue 19), end to end on synthetic samples.
dg_test(cli_samples COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_samples.sh LABELS cpu)
# experiments/*.sh --out DIR leaves the checkout as it was (git status), on tiny experiment files
dg_test(exp_out COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/exp_out.sh LABELS cpu)
# experiments/refresh.sh and dsgap attnstats over a sample set: pooled means, per-sample estimates and
# sign counts recomputed from the samples' units
dg_test(exp_sample_stats COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/exp_sample_stats.sh LABELS cpu)
