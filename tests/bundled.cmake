# tests/bundled.cmake: the bundled model (data/model, trained on the H200 by data/train.py) through
# dsgap's engine against the training-side PyTorch references stored in tests/fixtures/bundled
# (written by data/check_forward.py --write-fixture; here Debian's python3 with numpy + h5py, no torch).
#   ctest -R bundled
dg_test(bundled_forward LABELS cpu
  COMMAND /usr/bin/python3 -B ${CMAKE_SOURCE_DIR}/data/check_forward.py --fixture
          ${CMAKE_CURRENT_SOURCE_DIR}/fixtures/bundled --model ${CMAKE_SOURCE_DIR}/data/model
          --dsgap $<TARGET_FILE:dsgap>)
