# tests/kernel_speed_length.cmake: the analysis of speed against sequence length
# (experiments/kernel_speed_length.sh) on synthetic CSVs of known crossovers, and `dsgap callspeed` on
# the CPU (its rows and amortisation), the CPU twin of the GPU measurement.   ctest -R kernel_speed_length
dg_test(kernel_speed_length COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/kernel_speed_length.sh LABELS cpu)
