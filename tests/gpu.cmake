# tests/gpu.cmake: the GPU suite (label gpu): dsgap's CUDA attention kernels against an fp64 reference
# (the promoted ones; their earlier versions: gpu_kernels_dev, dev/kernels/CMakeLists.txt).
# Registered only when the CUDA kernels are built; exits 77 (skipped) on a machine without a GPU.
if(DSGAP_HAVE_CUDA AND TARGET dsgapkernels)
  dg_test(gpu_kernels SOURCES gpu_kernels.cu LABELS gpu LINK dsgapkernels)
  set_target_properties(gpu_kernels PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17)
  target_compile_options(gpu_kernels PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-gencode=arch=compute_90a,code=sm_90a>)
endif()
