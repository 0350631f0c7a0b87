# The gpuslice CLI through the real binary: seed scenario, exit codes, JSON, matrix round trip,
# and the node read through (simulated) NVML agreeing with the same file parsed directly.
add_test(NAME cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-cli.sh
         ${CMAKE_BINARY_DIR} ${GPUSLICE_TOPO_DIR})
set_tests_properties(cli PROPERTIES TIMEOUT 120)
