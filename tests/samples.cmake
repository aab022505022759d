# tests/samples.cmake: dsgap decompose over a sample set (issue 19), end to end on synthetic samples.
dg_test(cli_samples COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_samples.sh LABELS cpu)
# experiments/*.sh --out DIR leaves the checkout as it was (git status), on tiny experiment files
dg_test(exp_out COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/exp_out.sh LABELS cpu)
