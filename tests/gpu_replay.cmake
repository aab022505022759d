# The GPU replay against the CPU replay (skips without CUDA or a device).
dg_test(gpu_replay COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu_replay.sh LABELS gpu)
