# tests/asan.cmake: libdsgap under AddressSanitizer, UBSan and LeakSanitizer (libdsgap_asan.so, built
# beside libdsgap.so by src/CMakeLists.txt with gcc): 100 contexts of every policy kind made, used and
# destroyed leave nothing allocated (api_contexts.c, with a negative control). The Python closed loop
# on the same library is python_torch_asan (tests/python.cmake). One OpenMP thread: two spin-waiting
# under the sanitizers on a loaded 2-core machine took 5x as long.
if(TARGET dsgap_asan)
  add_executable(api_contexts api_contexts.c)
  target_link_libraries(api_contexts PRIVATE dsgap_asan)
  target_include_directories(api_contexts PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  dg_test(api_contexts LABELS cpu COMMAND $<TARGET_FILE:api_contexts>)
  set_property(TEST api_contexts APPEND PROPERTY ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=1" "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1" "OMP_NUM_THREADS=1")
endif()
