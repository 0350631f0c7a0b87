# gs_limits_format (the limits-file writer of `gpuslice run` and the agent) round-trips through the parser.
gpuslice_fuzz_target(limits-format ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-limits-format.c)
