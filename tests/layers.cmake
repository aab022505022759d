# tests/layers.cmake: src/ keeps its layers (tests/layers.py: no include runs up a layer or across
# siblings), and the check itself catches each kind of violation.
add_test(NAME layers COMMAND /usr/bin/python3 -B ${CMAKE_CURRENT_SOURCE_DIR}/layers.py ${CMAKE_SOURCE_DIR}/src)
add_test(NAME layers_self_test COMMAND /usr/bin/python3 -B ${CMAKE_CURRENT_SOURCE_DIR}/layers.py --self-test)
set_tests_properties(layers layers_self_test PROPERTIES LABELS cpu)
