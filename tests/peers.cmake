# tests/peers.cmake: the peer policies (src/peers.h): a property each paper states and fp64 checks of
# the selection-based peers' scores, selections and outputs, on the CPU. Their CPU-vs-GPU
# differential test is gpu_replay (tests/gpu_replay.sh runs --policies all,peers).
dg_test(test_peers SOURCES test_peers.c LABELS cpu)
