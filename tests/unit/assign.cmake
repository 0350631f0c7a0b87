# Node agent: honouring the scheduler's assignment (src/agent/assign.c) — pod parsing, call matching.
if(TARGET gpuslice_agent)
  gpuslice_unit_test(assign ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-assign.c ${CMAKE_CURRENT_SOURCE_DIR}/unit/helpers-assign.c)
  target_link_libraries(test-assign PRIVATE gpuslice_agent)
endif()
