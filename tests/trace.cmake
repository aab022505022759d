# tests/trace.cmake: the trace file, dsgap synth and dsgap info (docs/spec.md §6, §9), all on the CPU.
#   ctest -R 'trace|synth'
dg_test(test_trace SOURCES test_trace.c LABELS cpu)
dg_test(interop_h5py LABELS cpu
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/interop_h5py.py $<TARGET_FILE:test_trace>)
dg_test(cli_trace LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_trace.sh)
