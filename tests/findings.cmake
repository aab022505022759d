# tests/findings.cmake: results/README.md equals experiments/findings.sh's output from the committed
# results (tests/findings.sh, issue 49).
dg_test(findings COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/findings.sh LABELS cpu)
