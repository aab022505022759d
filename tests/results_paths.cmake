# tests/results_paths.cmake: committed results and the writers name no absolute path of a machine
# (tests/results_paths.sh, issue 49).
dg_test(results_paths COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/results_paths.sh LABELS cpu)
