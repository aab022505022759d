# tests/closed_loop.cmake: experiment 4's closed-loop cells of dsgap run on the tiny random-weight Wan
# model of tests/wan_ref.py derive (the wan_models fixture): grid, rows, resume, shards + merge,
# workers, bad experiment files.   ctest -R cli_closed_loop
dg_test(cli_closed_loop COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_closed_loop.sh LABELS cpu)
set_tests_properties(cli_closed_loop PROPERTIES FIXTURES_REQUIRED wan_models)
# experiments/closed_loop.sh --cells DIR on a synthetic run folder (no model): the tables with
# dsgap compare's intervals and the sign counts, the figure, the README (issue 19).   ctest -R exp_closed_loop
dg_test(exp_closed_loop COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/exp_closed_loop.sh LABELS cpu)
# experiments/cfg_meta_guidance.sh made small (1024 tokens, 3 steps, one guidance scale) on the bundled
# model: its PSNRs against an independent dsgap generate, its table against its rows, a failing run
# in one line.   ctest -R exp_cfg_meta_guidance
dg_test(exp_cfg_meta_guidance COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/exp_cfg_meta_guidance.sh LABELS cpu)
# schedule families and axes, schedules refused against the run's steps and layers (run, replay,
# generate), a closed-loop sweep sharing its dense reference and anchor-independent cells, equal
# to the same cells one by one (issue 50).   ctest -R cli_schedules
dg_test(cli_schedules COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_schedules.sh LABELS cpu)
set_tests_properties(cli_schedules PROPERTIES FIXTURES_REQUIRED wan_models)
