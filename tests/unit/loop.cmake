# The agent's event loop (src/util/loop.c): fd, timer, signal and cross-thread sources, error paths.
gpuslice_unit_test(loop ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-loop.c)
