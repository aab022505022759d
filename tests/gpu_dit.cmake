# tests/gpu_dit.cmake: the DiT engine's GPU op table (src/wan_ops_gpu.c, kernels/dit_ops.cu) against
# its CPU twin, op by op, one forward and a few sampler steps dense and mc-sparse (label gpu; exits 77
# without a device). Registered only when the CUDA kernels are built; uses the test models of wan.cmake.
if(DSGAP_HAVE_CUDA AND TARGET dsgapkernels)
  dg_test(gpu_dit SOURCES gpu_dit.c LABELS gpu
    COMMAND ${CMAKE_CURRENT_BINARY_DIR}/wan_models ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/wan)
  set_tests_properties(gpu_dit PROPERTIES FIXTURES_REQUIRED wan_models)
  # the kernels' static library carries C++ (CUB) host code: link with the C++ runtime
  set_target_properties(gpu_dit PROPERTIES LINKER_LANGUAGE CUDA)
endif()
