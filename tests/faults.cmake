# tests/faults.cmake: fault injection (issue 18), SQLite style. tests/faultfs.c is an LD_PRELOAD
# interposer that fails the Nth write-level call (write, pwrite, writev, rename, mkdir, fsync, stdio
# through write) with ENOSPC; tests/faults.sh runs every writer under it for N = 1, 2, ... and checks
# one error line, a non-zero exit, nothing left behind and inputs unchanged; SIGTERM at random
# points; and the file-safety reproductions of the issue (inputs overwritten, locks, stale tables).
#   ctest -R faults
add_library(faultfs SHARED faultfs.c)
target_link_libraries(faultfs PRIVATE ${CMAKE_DL_LIBS})
set_target_properties(faultfs PROPERTIES PREFIX "" C_VISIBILITY_PRESET default)
dg_test(faults LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults.sh $<TARGET_FILE:faultfs>)
set_tests_properties(faults PROPERTIES FIXTURES_REQUIRED wan_models TIMEOUT 600)
