# tests/cli_options.cmake: every subcommand answers a bad option (unknown, a value missing or
# unwanted) with one line naming it and exit 2 (util.h dg_opt_bad).   ctest -R cli_options
dg_test(cli_options COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_options.sh LABELS cpu)
