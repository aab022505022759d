# tests/cache.cmake: the cache-storage switches of issue 21 (residual_dtype, keys, cfg_meta) on the CPU
# against independent rounding (test_cache), and the memory plan against the issue's numbers (test_memplan).
dg_test(test_cache SOURCES test_cache.c LABELS cpu)
dg_test(test_memplan SOURCES test_memplan.c LABELS cpu)
