# config_parse_text on arbitrary bytes; accepted input must dump and re-parse to the same config.
# config.c is compiled into the target itself so that, in the libFuzzer build, the parser carries
# the coverage instrumentation the fuzzer steers by (gpuslice_core is built without it).
gpuslice_fuzz_target(config ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-config.c ${CMAKE_SOURCE_DIR}/src/config/config.c)
