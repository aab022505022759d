# tests/closed_decompose.cmake: dsgap decompose --closed (issue 50, items 3 and 7) end to end on the
# CPU: a tiny closed loop of the oracle ladder and the MC-Sparse factorial (the wan_models fixture's
# random-weight model), every number of the tables recomputed by awk from closed_loop.csv, the
# intervals of 2 samples [min, max], experiments/closed_ladder.ini's grid, bad input.
#   ctest -R cli_closed_decompose
dg_test(cli_closed_decompose COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_closed_decompose.sh LABELS cpu)
set_tests_properties(cli_closed_decompose PROPERTIES FIXTURES_REQUIRED wan_models)
# dev/mass_vs_error.py's numpy selections and errors against dsgap replay on a synthetic trace
#   ctest -R dev_mass_vs_error
dg_test(dev_mass_vs_error COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dev_mass_vs_error.sh LABELS cpu)
