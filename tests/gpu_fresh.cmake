# tests/gpu_fresh.cmake: staleness (fresh=groups|keys|residual, issue 50) and the sparse_steps window
# on the GPU backend against the CPU backend (gpu_fresh.c; label gpu, exits 77 without a device).
if(DSGAP_HAVE_CUDA AND TARGET dsgapkernels)
  dg_test(gpu_fresh SOURCES gpu_fresh.c LABELS gpu LINK dsgapkernels)
  # the kernels' static library carries C++ (CUB) host code: link with the C++ runtime
  set_target_properties(gpu_fresh PROPERTIES LINKER_LANGUAGE CUDA)
endif()
