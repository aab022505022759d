# tests/joint.cmake: joint attention in replay (issue 20 item 3, docs/spec.md §3.7): text rows
# dense, text keys in every list, for every preset and peer on the CPU backend.
#   ctest -R test_joint
dg_test(test_joint SOURCES test_joint.c LABELS cpu)
