# tests/gpu_meta.cmake: the metadata kernels (exact and pooled group scores, per-query oracle top-k,
# group top-k/top-p selection, PCA grouping, device metrics) against their CPU twins in src/ and fp64
# references (label gpu). Registered only when the CUDA kernels are built; exits 77 (skipped) on a
# machine without a GPU. On a GPU machine without the harness's dependencies: scripts/device_all.sh
# (STEPS=meta_suite), from the binaries and libraries that scripts/device_pack.sh carries.
if(DSGAP_HAVE_CUDA AND TARGET dsgapkernels)
  dg_test(gpu_meta SOURCES gpu_meta.c LABELS gpu LINK dsgapkernels)
  # the kernels' static library carries C++ (CUB) host code: link with the C++ runtime
  set_target_properties(gpu_meta PROPERTIES LINKER_LANGUAGE CUDA)
endif()
