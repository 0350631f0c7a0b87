# Allocator (src/alloc): the pick against brute force on every reference topology, errors, sets as text.
gpuslice_unit_test(alloc ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-alloc.c)
