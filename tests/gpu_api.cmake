# tests/gpu_api.cmake: libdsgap's C ABI on the GPU against the same ABI on the CPU (gpu_api.c:
# strided device tensors on a non-blocking stream, bf16 and fp16, dense, ladder, mc-sparse, peers;
# label gpu, exits 77 without a device). On the GPU machine: scripts/device_all.sh, step gpu_api.
if(DSGAP_HAVE_CUDA AND TARGET dsgapkernels)
  dg_test(gpu_api SOURCES gpu_api.c LABELS gpu)
  # the kernels' static library carries C++ (CUB) host code: link with the C++ runtime
  set_target_properties(gpu_api PROPERTIES LINKER_LANGUAGE CUDA)
endif()
