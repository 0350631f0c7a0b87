# Fractional GPUs in the node agent (src/agent/share.c): device-ID parser, preferred allocation and
# Allocate on arbitrary bytes. The agent sources are compiled in so the libFuzzer build instruments them.
if(TARGET gpuslice_rpc)
  gpuslice_fuzz_target(share ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-share.c ${CMAKE_SOURCE_DIR}/src/agent/share.c
                       ${CMAKE_SOURCE_DIR}/src/agent/share-record.c
                       ${CMAKE_SOURCE_DIR}/src/agent/plugin.c ${CMAKE_SOURCE_DIR}/src/agent/health.c)
  target_link_libraries(fuzz-share PRIVATE gpuslice_rpc gpuslice_monitor)
endif()
