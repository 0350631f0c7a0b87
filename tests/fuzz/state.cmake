# state_decode on arbitrary bytes; accepted input must re-encode to a file that decodes the same.
# state.c is compiled into the target itself so that, in the libFuzzer build, the decoder carries
# the coverage instrumentation the fuzzer steers by (gpuslice_core is built without it).
gpuslice_fuzz_target(state ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-state.c ${CMAKE_SOURCE_DIR}/src/state/state.c)
