# tests/bundled.cmake: the bundled model (data/model, trained on the H200 by data/train.py) through
# dsgap's engine against the training-side PyTorch references stored in tests/fixtures/bundled
# (written by data/check_forward.py --write-fixture; here Debian's python3 with numpy + h5py, no torch).
#   ctest -R bundled
dg_test(bundled_forward LABELS cpu
  COMMAND /usr/bin/python3 -B ${CMAKE_SOURCE_DIR}/data/check_forward.py --fixture
          ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/bundled --model ${CMAKE_SOURCE_DIR}/data/model
          --dsgap $<TARGET_FILE:dsgap>)
# attnstats against fp64 NumPy, sheet against its latents, the demo's bad inputs (tests/cli_bundled.sh)
dg_test(cli_bundled LABELS cpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_bundled.sh)
