# Node agent: the gRPC wrapper (src/rpc) and the agent's protocol logic (src/agent).
if(TARGET gpuslice_rpc)
  gpuslice_unit_test(rpc ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-rpc.c)
  target_link_libraries(test-rpc PRIVATE gpuslice_rpc)
endif()
if(TARGET gpuslice_agent)
  # The agent's fixtures (tests/unit/helpers-agent.h), for every unit test of src/agent.
  add_library(gpuslice_test_agent_helpers STATIC ${CMAKE_CURRENT_SOURCE_DIR}/unit/helpers-agent.c)
  target_link_libraries(gpuslice_test_agent_helpers PUBLIC gpuslice_test_helpers gpuslice_agent)
  gpuslice_unit_test(agent ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-agent.c)
  target_link_libraries(test-agent PRIVATE gpuslice_test_agent_helpers gpuslice_agent)
  gpuslice_unit_test(migdev ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-migdev.c)
  target_link_libraries(test-migdev PRIVATE gpuslice_test_agent_helpers gpuslice_agent)
endif()
