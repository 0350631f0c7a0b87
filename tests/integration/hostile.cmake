# Hostile local clients against the node agent's status socket and metrics server
# (tests/integration/test_hostile_local.py, reusing test_agent.py's environment).
if(TARGET gpuslice_agent)
  foreach(t status-hostile metrics-hostile)
    add_test(NAME agent-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_hostile_local.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${t})
    set_tests_properties(agent-${t} PROPERTIES TIMEOUT 120 LABELS "integration;agent")
  endforeach()
endif()
