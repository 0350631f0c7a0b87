# Checked number and size parsing (src/util).
gpuslice_unit_test(util ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-util.c)
# The atomic file writer and the per-container limits directory (src/util), error paths included.
gpuslice_unit_test(util-files ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-util-files.c)
