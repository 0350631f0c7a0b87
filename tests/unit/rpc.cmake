# Node agent: the gRPC wrapper (src/rpc) and the agent's protocol logic (src/agent).
if(TARGET gpuslice_rpc)
  gpuslice_unit_test(rpc ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-rpc.c)
  target_link_libraries(test-rpc PRIVATE gpuslice_rpc)
endif()
if(TARGET gpuslice_agent)
  gpuslice_unit_test(agent ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-agent.c)
  target_link_libraries(test-agent PRIVATE gpuslice_agent)
endif()
