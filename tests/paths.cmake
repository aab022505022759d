# tests/paths.cmake: every src/, kernels/, scripts/, experiments/ and python/ path that the .md, .sh,
# .ini, .c and .h files cite exists (tests/paths.sh), and the check itself finds a missing one.
add_test(NAME paths COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/paths.sh ${CMAKE_SOURCE_DIR})
add_test(NAME paths_self_test COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/paths.sh --self-test)
set_tests_properties(paths paths_self_test PROPERTIES LABELS cpu)
