gpuslice_fuzz_target(interposer-limits ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-interposer-limits.c)
