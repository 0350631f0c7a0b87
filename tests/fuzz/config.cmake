# config_parse_text on arbitrary bytes; accepted input must dump and re-parse to the same config.
gpuslice_fuzz_target(config ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-config.c)
