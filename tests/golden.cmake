# tests/golden.cmake: the key commands' outputs (replay, decompose, attnstats, refreshstats, callspeed
# and bench rows, the closed loop's latents, compare, drift) byte for byte the committed goldens of
# tests/fixtures/golden, made before issue 49's moves.   ctest -R golden
dg_test(golden COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden.sh LABELS cpu)
set_tests_properties(golden PROPERTIES FIXTURES_REQUIRED wan_models)
