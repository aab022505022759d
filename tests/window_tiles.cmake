# tests/window_tiles.cmake: the window kernel's key tiles and pair rule (kernels/window_tiles.h, C: the
# code the kernel runs) on the CPU, against the CPU twin's window lists; the kernel itself:
# gpu_kernels (fp64 reference), gpu_replay and gpu_dit.
dg_test(test_window_tiles SOURCES test_window_tiles.c LABELS cpu)
target_include_directories(test_window_tiles PRIVATE ${CMAKE_SOURCE_DIR}/kernels)
