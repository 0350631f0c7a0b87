gpuslice_unit_test(topo ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-topo.c)
