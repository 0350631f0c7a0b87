# The node agent's protocol handlers (src/agent/plugin.c, whole.c) on arbitrary request bytes; the agent
# library is built instrumented (fuzzer-no-link) in the fuzzing configuration.
if(TARGET gpuslice_agent)
  gpuslice_fuzz_target(proto ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-proto.c)
  target_link_libraries(fuzz-proto PRIVATE gpuslice_agent)
endif()
