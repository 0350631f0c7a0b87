# The node agent's reading of the scheduler's assignment and its call matching (src/agent/assign.c).
if(TARGET gpuslice_agent)
  gpuslice_fuzz_target(assign ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-assign.c)
  target_link_libraries(fuzz-assign PRIVATE gpuslice_agent)
endif()
