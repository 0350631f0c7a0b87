# Node agent: the gRPC wrapper (src/rpc) and the agent's protocol logic (src/agent).
if(TARGET gpuslice_rpc)
  gpuslice_unit_test(rpc ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-rpc.c)
  target_link_libraries(test-rpc PRIVATE gpuslice_rpc)
endif()
