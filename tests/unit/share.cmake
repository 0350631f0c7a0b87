# Node agent: fractional GPUs (src/agent/share.c) — IDs, limits files, pairing, clean-up.
if(TARGET gpuslice_agent)
  gpuslice_unit_test(share ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-share.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/helpers-share.c)
  target_link_libraries(test-share PRIVATE gpuslice_test_agent_helpers gpuslice_agent)
endif()
# The agent's share placed by the extender's packing policy (src/agent/share-pack.c) picks the extender's GPU.
if(TARGET gpuslice_agent)
  gpuslice_unit_test(share-pack ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-share-pack.c)
  target_link_libraries(test-share-pack PRIVATE gpuslice_agent gpuslice_sched gpuslice_alloc)
endif()
