# tests/decompose.cmake: the decomposition (ladder, Shapley, bootstrap, post-warm-up filtering,
# loading) and the decompose and plot commands end to end, with bad input.
dg_test(test_decompose SOURCES test_decompose.c LABELS cpu)
dg_test(cli_decompose COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_decompose.sh LABELS cpu)
