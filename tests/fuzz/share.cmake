# Fractional GPUs in the node agent (src/agent/share*.c): device-ID parser, preferred allocation and
# Allocate on arbitrary bytes, the journal codec; the agent library is built instrumented (fuzzer-no-link)
# in the fuzzing configuration.
if(TARGET gpuslice_agent)
  gpuslice_fuzz_target(share ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-share.c)
  target_link_libraries(fuzz-share PRIVATE gpuslice_agent)
endif()
