# Checked number and size parsing (src/util).
gpuslice_unit_test(util ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-util.c)
