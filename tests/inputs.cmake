# tests/inputs.cmake: the bad-input campaign of issue 52: one check of every command's output folder
# against its inputs, merge's check of the shards' input.sum, lists checked before work, work bounded
# before it starts, nothing partial left on a failure (a full disk: tests/faultfs.c, faults.cmake),
# messages that say the range or the fix. All on the CPU, a few seconds.
#   ctest -R cli_inputs
dg_test(cli_inputs LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_inputs.sh $<TARGET_FILE:faultfs>)
