# tests/wan.cmake: the safetensors reader and the Wan2.1 DiT engine on the CPU, against the
# independent fp64 NumPy reference (tests/wan_ref.py; fixtures in tests/fixtures/wan).
#   ctest -R 'safetensors|wan|dit'
dg_test(test_safetensors SOURCES test_safetensors.c LABELS cpu)
# the test models (both key layouts, dtypes, shards, prefix, no config; broken ones) from the fixtures
add_test(NAME wan_models COMMAND /usr/bin/python3 -B ${CMAKE_CURRENT_SOURCE_DIR}/wan_ref.py derive
         ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/wan ${CMAKE_CURRENT_BINARY_DIR}/wan_models)
set_tests_properties(wan_models PROPERTIES FIXTURES_SETUP wan_models LABELS cpu)
dg_test(test_wan SOURCES test_wan.c wan_ops_checked.c LABELS cpu
  COMMAND ${CMAKE_CURRENT_BINARY_DIR}/wan_models ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/wan)
set_tests_properties(test_wan PROPERTIES FIXTURES_REQUIRED wan_models)
# dsgap capture and generate end to end, the trace read back with h5py, bad checkpoints
dg_test(cli_dit LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_dit.sh)
set_tests_properties(cli_dit PROPERTIES FIXTURES_REQUIRED wan_models)
# the committed reference outputs are what tests/wan_ref.py computes now (fixtures not stale)
add_test(NAME wan_ref_check COMMAND /usr/bin/python3 -B ${CMAKE_CURRENT_SOURCE_DIR}/wan_ref.py check
         ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/wan)
set_tests_properties(wan_ref_check PROPERTIES LABELS cpu)
# one forward with every block's output and Q/K/V dumped, for the PyTorch / diffusers comparison
# (tests/torch_ref/compare_diffusers.py; needs torch and diffusers, so it is not a ctest)
add_executable(wan_dump wan_dump.c)
target_link_libraries(wan_dump PRIVATE dsgapcore)
target_include_directories(wan_dump PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
