# Allocator (src/alloc): the pick against brute force on every reference topology, errors, sets as text.
gpuslice_unit_test(alloc ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-alloc.c)
# Fractional placement (src/alloc/fraction.c): partner, must-include, binpack/spread, pair room, errors.
gpuslice_unit_test(fraction ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-fraction.c)
