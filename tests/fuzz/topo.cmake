gpuslice_fuzz_target(topo ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-topo.c)
gpuslice_fuzz_target(node ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-topo.c)
