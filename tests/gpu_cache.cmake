# tests/gpu_cache.cmake: the GPU backend's cache storage (issue 21: residual_dtype=bf16|fp8, keys=bitmap;
# kernels/cache_store.cu and the sparse kernel's stored-dtype epilogue) against the CPU twin,
# src/policy/cache_store.c (gpu_cache.c; label gpu, exits 77 without a device). On the GPU machine:
# scripts/device_all.sh, step gpu_cache.
if(DSGAP_HAVE_CUDA AND TARGET dsgapkernels)
  dg_test(gpu_cache SOURCES gpu_cache.c LABELS gpu LINK dsgapkernels)
  # the kernels' static library carries C++ (CUB) host code: link with the C++ runtime
  set_target_properties(gpu_cache PROPERTIES LINKER_LANGUAGE CUDA)
endif()
