# The simulated MPS control daemon and its clients' pinned memory limit (tests/integration/test_sim_mps.py).
if(TARGET gpuslice_sim_mps)
  add_test(NAME sim-mps-pinned-limit
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_sim_mps.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo)
  set_tests_properties(sim-mps-pinned-limit PROPERTIES TIMEOUT 120 LABELS "integration;sim")
endif()
