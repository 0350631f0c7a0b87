# Config file and flags (src/config): every error path, precedence, dump round trip, docs coverage.
gpuslice_unit_test(config ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-config.c)
