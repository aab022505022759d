# tests/comparison.cmake: experiments/comparison.sh end to end on the CPU with a tiny closed loop (the
# random-weight Wan model of the wan_models fixture): dsgap run (fidelity, speed), dsgap compare's
# tables, run.json and Pareto figure; bad input to dsgap compare.   ctest -R cli_comparison
dg_test(cli_comparison COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_comparison.sh LABELS cpu)
set_tests_properties(cli_comparison PROPERTIES FIXTURES_REQUIRED wan_models)
# tests/cli_compare_matched.sh: schedules as rows, projected speedups, matched-cost tables (hand-made runs)
dg_test(cli_compare_matched COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_compare_matched.sh LABELS cpu)
