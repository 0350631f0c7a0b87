# state_decode on arbitrary bytes; accepted input must re-encode to the same bytes.
gpuslice_fuzz_target(state ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-state.c)
