# tests/validate.cmake: numerics and validation before work (issue 18): overflowing scores, an
# all-zero V, duplicate indices, schedules and densities that do not fit the trace, oversized traces,
# CSV quoting, info's escaping, bench's argument checks. All on the CPU, a few seconds.
#   ctest -R cli_validate
dg_test(cli_validate LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_validate.sh)
