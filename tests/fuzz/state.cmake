# state_decode on arbitrary bytes; accepted input must re-encode to a file that decodes the same.
gpuslice_fuzz_target(state ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-state.c)
