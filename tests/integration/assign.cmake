# The node agent honours the scheduler's assignment (tests/integration/test_assign.py): the real agent
# with the kubelet stand-in (device plugin calls, PodResources) and the API stand-in (pods, patches).
if(TARGET gpuslice_agent)
  foreach(t assign-reload assign-hang assign-cache assign-pairs assign-twins assign-whole assign-repair assign-sweep assign-record)
    add_test(NAME agent-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_assign.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${t})
    set_tests_properties(agent-${t} PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77 LABELS "integration;agent")
  endforeach()
  # 16 whole GPUs for one container, through the real extender (issue 19): a DGX-2 class node
  add_test(NAME agent-assign-sixteen
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_assign.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/dgx2-v100-16gpu-nvswitch.topo assign-sixteen)
  set_tests_properties(agent-assign-sixteen PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77 LABELS "integration;agent")
endif()
