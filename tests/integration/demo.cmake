# `make demo` is one of the README's two commands: run it as a test too, so a demo that no longer
# exits 0 (or whose agent part fails one of its checks) fails the suite.
add_test(NAME demo COMMAND ${CMAKE_SOURCE_DIR}/scripts/demo.sh ${CMAKE_BINARY_DIR})
set_tests_properties(demo PROPERTIES TIMEOUT 180 LABELS "integration")
