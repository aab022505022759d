# tests/sweep.cmake: a fuzz-style sweep over every command's options (issue 52): each option that
# takes a value gets '', -1, 0, nan, 1e999, 99999999999, x,x and a control character; every answer
# within a time bound, no signal, nothing left behind, messages escaped. About a minute on 2 cores.
#   ctest -R cli_sweep
dg_test(cli_sweep LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_sweep.sh)
set_tests_properties(cli_sweep PROPERTIES TIMEOUT 900)
