# tests/peers_matched.cmake: budget=matched for the peers (docs/spec.md §3.6, src/policy/peers.h) on a
# synthetic trace: computed density within 0.02 of rho or reported unreachable (replay's warning,
# run.json, decompose's peers table); unmatched presets' rows unchanged beside them.
dg_test(cli_peers_matched COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_peers_matched.sh LABELS cpu)
