# Resume is exact (issue 18, item 5): a trace changed in place invalidates the cells that read a
# changed unit (CELL/input.sum), a damaged cell is recomputed and installed (tests/cli_resume.sh).
dg_test(cli_resume COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_resume.sh LABELS cpu)
