# parse_u64 / parse_uint / parse_size (src/util/util.c), under every config, topology and CLI parser.
gpuslice_fuzz_target(util ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-util.c)
