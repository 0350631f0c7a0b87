# Node agent integration tests: the real `gpuslice node` on the simulated node, driven by the
# kubelet stand-in (tests/integration/kubelet_standin.py, Debian's python3-grpcio).
if(TARGET gpuslice_agent)
  set(_agent_tests register kubelet-late register-retry register-hang register-backoff preferred allocate allocate-options cdi-only hostile kubelet-restart
      restart-state restart-state-file-only corrupt-state health-xid health-lost sigterm status-cli sighup metrics
      podsync-periodic)
  foreach(t ${_agent_tests})
    add_test(NAME agent-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_agent.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${t})
    set_tests_properties(agent-${t} PROPERTIES TIMEOUT 120 LABELS "integration;agent")
  endforeach()
endif()

# MIG through the device plugin (--mig-strategy mixed/single, tests/integration/test_mig_agent.py).
if(TARGET gpuslice_agent)
  foreach(t mixed mixed-index mixed-health mixed-cdi restart single single-mismatch share share-single)
    add_test(NAME agent-mig-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_mig_agent.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${CMAKE_SOURCE_DIR}/tests/data/mig/a100-80gb-2gpu.node ${t})
    set_tests_properties(agent-mig-${t} PROPERTIES TIMEOUT 120 LABELS "integration;agent;mig" SKIP_RETURN_CODE 77)
  endforeach()
endif()

# MIG on the Node object and layouts from the node label (test_mig_layout.py: kubelet and API stand-ins).
if(TARGET gpuslice_agent)
  foreach(t publish publish-share layout)
    add_test(NAME agent-mig-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_mig_layout.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${CMAKE_SOURCE_DIR}/tests/data/mig/a100-80gb-2gpu.node ${t})
    set_tests_properties(agent-mig-${t} PROPERTIES TIMEOUT 180 LABELS "integration;agent;mig;kube" SKIP_RETURN_CODE 77)
  endforeach()
endif()
