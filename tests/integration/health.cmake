# Health within 1 s for every simulated fault kind (tests/integration/test_health.py): Xid, lost
# GPU, NVML refusing a GPU (NO_PERMISSION) and recovery, each injected several times.
if(TARGET gpuslice_agent)
  add_test(NAME agent-health-1s
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_health.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo health-1s)
  set_tests_properties(agent-health-1s PROPERTIES TIMEOUT 120 LABELS "integration;agent")
endif()
# The quiet period counts from the first normal answer: a fault with an Xid that ends between two
# probes is listed Healthy no sooner than the quiet period after it ended (issue 19, point 8).
if(TARGET gpuslice_agent)
  add_test(NAME agent-health-quiet
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_health.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo health-quiet)
  set_tests_properties(agent-health-quiet PROPERTIES TIMEOUT 120 LABELS "integration;agent")
endif()
