# tests/stale.cmake: issue 50's staleness (fresh=) and drift (drift.csv, steps.h5, sparse_steps,
# sparse_layers) in the closed loop of dsgap run on the tiny random-weight Wan model.
#   ctest -R cli_stale_loop
dg_test(cli_stale_loop COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_stale_loop.sh LABELS cpu)
set_tests_properties(cli_stale_loop PROPERTIES FIXTURES_REQUIRED wan_models)
# dsgap drift's tables on synthetic run folders against numpy.   ctest -R cli_drift
dg_test(cli_drift COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_drift.sh LABELS cpu)
