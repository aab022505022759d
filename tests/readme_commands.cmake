# tests/readme_commands.cmake: README's two commands and .ci/run agree (tests/readme_commands.sh, issue 51).
dg_test(readme_commands COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/readme_commands.sh LABELS cpu)
