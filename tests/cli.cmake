# The CLI end to end (synth -> replay -> decompose -> plot) and replay's bad-input answers.
dg_test(cli_pipeline COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_pipeline.sh LABELS cpu)
