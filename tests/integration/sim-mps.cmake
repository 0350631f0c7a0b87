# The simulated MPS control daemon and its clients' pinned memory limit and thread percentage
# (tests/integration/test_sim_mps.py).
if(TARGET gpuslice_sim_mps)
  foreach(t pinned-limit thread-rate)
    add_test(NAME sim-mps-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_sim_mps.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${t})
    set_tests_properties(sim-mps-${t} PROPERTIES TIMEOUT 120 LABELS "integration;sim")
  endforeach()
endif()
