# The gpuslice CLI through the real binary: seed scenario, exit codes, JSON, matrix round trip,
# and the node read through (simulated) NVML agreeing with the same file parsed directly.
add_test(NAME cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-cli.sh
         ${CMAKE_BINARY_DIR} ${GPUSLICE_TOPO_DIR})
set_tests_properties(cli PROPERTIES TIMEOUT 120)
# The reference docs agree with the built program (tests/integration/test_docs.py): docs/cli.md
# against every command's --help, docs/metrics.md against the agent's and the extender's scrapes, README.md and
# docs/install.md (build packages, paths, the first example's output), docs/architecture.md's layers, libraries
# and commands against the CMake files, the build, the include lint and the command table.
foreach(t cli metrics install architecture)
  add_test(NAME docs-${t} COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_docs.py
                                  --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} ${t})
  set_tests_properties(docs-${t} PROPERTIES TIMEOUT 120 LABELS "integration;docs")
endforeach()
