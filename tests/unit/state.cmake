# State file (src/state): encode/decode, atomic save/load, corruption detection, reconcile.
gpuslice_unit_test(state ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-state.c)
