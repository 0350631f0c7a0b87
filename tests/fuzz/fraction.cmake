# alloc_pick_fraction on arbitrary nodes and requests; fraction.c is compiled in for instrumentation.
gpuslice_fuzz_target(fraction ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-fraction.c ${CMAKE_SOURCE_DIR}/src/alloc/fraction.c)
