# tests/python.cmake: the Python package (python/, imports as dsgap) against diffusers' models, the C
# reader and the C engine (label python). The tests run in the virtual environment that scripts/test.sh
# makes with pinned torch (CPU), diffusers, h5py and numpy (tests/py/make_venv.sh): $DSGAP_VENV, else
# /opt/dsgap-venv. Without it the tests are still registered and fail, saying how to make it.
#   bash tests/py/make_venv.sh && ctest --preset default -L python
if(DEFINED ENV{DSGAP_VENV})
  set(DG_VENV $ENV{DSGAP_VENV})
else()
  set(DG_VENV /opt/dsgap-venv)
endif()
set(DG_PY ${CMAKE_CURRENT_SOURCE_DIR}/py)
# the replay's dense attention over a trace, raw float32 out (tests/py/test_families.py)
add_executable(replay_dense py/replay_dense.c)
target_link_libraries(replay_dense PRIVATE dsgapcore)

function(dg_pytest name)
  cmake_parse_arguments(T "" "" "COMMAND;FIXTURES" ${ARGN})
  add_test(NAME ${name} COMMAND bash ${DG_PY}/run.sh ${DG_VENV} ${T_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS python TIMEOUT 600
    ENVIRONMENT "DSGAP=$<TARGET_FILE:dsgap>;DSGAP_LIB=$<TARGET_FILE:dsgap_shared>;REPLAY_DENSE=$<TARGET_FILE:replay_dense>;DSGAP_SOURCE=${CMAKE_SOURCE_DIR};OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=2;PYTHONDONTWRITEBYTECODE=1"
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  if(T_FIXTURES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED ${T_FIXTURES})
  endif()
endfunction()

foreach(fam wan wan22 hunyuanvideo cogvideox mochi ltx flux skyreels cosmos sd3 qwenimage flux2 hunyuanvideo15)
  dg_pytest(python_family_${fam} COMMAND ${DG_PY}/test_families.py ${fam} ${CMAKE_CURRENT_BINARY_DIR}/py_${fam})
endforeach()
# negative controls (no RoPE, wrong CFG branch), generic mode, errors, the C writer's format,
# dsgap-capture on a pipeline directory, pip install ./python
dg_pytest(python_controls COMMAND ${DG_PY}/test_controls.py ${CMAKE_CURRENT_BINARY_DIR}/py_controls)
# issue 20: the trace writer's two layouts (compression none / deflate) of one tiny capture: same decoded
# chunks, h5py arrays, dsgap info --check, replay_dense bytes and dsgap replay metrics
dg_pytest(python_compression COMMAND ${DG_PY}/test_compression.py ${CMAKE_CURRENT_BINARY_DIR}/py_compression)
# issue 22: dsgap.torch.attention through libdsgap (ctypes) in every family: dense and mc-sparse at
# density 1 = torch's attention, mc-sparse at 0.25 sparse, bf16, the CFG branches, errors
dg_pytest(python_torch COMMAND ${DG_PY}/test_torch.py)
# the same with libdsgap_asan.so (tests/asan.cmake): every family's 3-step mc-sparse closed loop with
# the C side under AddressSanitizer and UBSan; gcc's libasan preloaded into Python, its leak check
# off (Python's and torch's own allocations outlive the process); a report fails the test
if(TARGET dsgap_asan)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE DG_LIBASAN
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  dg_pytest(python_torch_asan COMMAND ${DG_PY}/test_torch.py)
  set_property(TEST python_torch_asan APPEND PROPERTY ENVIRONMENT "DSGAP_LIB=$<TARGET_FILE:dsgap_asan>"
    "LD_PRELOAD=${DG_LIBASAN}" "ASAN_OPTIONS=detect_leaks=0" "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
    "OMP_NUM_THREADS=1")
endif()
# issue 22: python/bench/bench_processor.py (the H200 benchmark: scripts/device_python.sh) run through
# at tiny configurations on the CPU backend (--tiny): every part, finite, no fallback, sparse calls made
dg_pytest(python_bench_processor COMMAND ${CMAKE_SOURCE_DIR}/python/bench/bench_processor.py --tiny
          --out ${CMAKE_CURRENT_BINARY_DIR}/py_bench_processor)
# issue 20: Wan2.1 across engines: dsgap.capture on diffusers' WanTransformer3DModel = dsgap capture
# (the C engine) on the same weights, noise and text, both key layouts (the wan_models fixture)
dg_pytest(python_engines COMMAND ${DG_PY}/test_engines.py ${CMAKE_CURRENT_BINARY_DIR}/wan_models
          ${CMAKE_CURRENT_BINARY_DIR}/py_engines FIXTURES wan_models)
# issue 51: the generic mode made safe: dsgap.describe (sites, kinds, text, layout), layers by block, a
# wrong grid refused, the timestep scale detected, joint padding masks (capture and the processor)
dg_pytest(python_generic COMMAND ${DG_PY}/test_generic.py ${CMAKE_CURRENT_BINARY_DIR}/py_generic)
# issue 51: every policy's joint-attention rule through libdsgap against float64 NumPy: text queries
# dense, text keys kept for every video query (a marker's lower bound), with a negative control
dg_pytest(python_joint_ref COMMAND ${DG_PY}/test_joint_ref.py)
# issue 51: libdsgap never ends its caller: out of memory at dsgap_context_create and in a call (a child
# under RLIMIT_AS, through ctypes) is DSGAP_E_MEMORY with the bytes and what would fit; the process survives
dg_pytest(python_memory COMMAND ${DG_PY}/test_memory.py)
# PSNR/SSIM through the C ABI (dsgap_frames_fidelity, what dsgap.generate calls) against float64 NumPy
dg_pytest(python_fidelity COMMAND ${DG_PY}/test_fidelity.py)
# issue 22: python -m dsgap.generate, the closed loop through a diffusers pipeline: generate.csv/json in
# dsgap generate's schema (checked against the C engine's own output), frames for dsgap sheet
dg_pytest(python_generate COMMAND ${DG_PY}/test_generate.py ${CMAKE_CURRENT_BINARY_DIR}/wan_models
          ${CMAKE_CURRENT_BINARY_DIR}/py_generate FIXTURES wan_models)
