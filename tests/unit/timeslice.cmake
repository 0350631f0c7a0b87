# Node agent: time-slicing replicas (src/agent/timeslice.c, replica-id.c) and GFD's sharing labels.
if(TARGET gpuslice_agent)
  gpuslice_unit_test(timeslice ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-timeslice.c)
  target_link_libraries(test-timeslice PRIVATE gpuslice_test_agent_helpers gpuslice_agent)
endif()
