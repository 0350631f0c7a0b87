# The node agent's protocol handlers (src/agent/plugin.c) on arbitrary request bytes.
# plugin.c is compiled into the target so the libFuzzer build instruments it.
if(TARGET gpuslice_rpc)
  gpuslice_fuzz_target(proto ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-proto.c ${CMAKE_SOURCE_DIR}/src/agent/plugin.c
                       ${CMAKE_SOURCE_DIR}/src/agent/share.c ${CMAKE_SOURCE_DIR}/src/agent/share-record.c
                       ${CMAKE_SOURCE_DIR}/src/agent/health.c)
  target_link_libraries(fuzz-proto PRIVATE gpuslice_rpc gpuslice_monitor)
endif()
