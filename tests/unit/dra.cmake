# The DRA driver (src/dra): names, versions, quantities, slices, the decoders, the engine in a private dir.
if(TARGET gpuslice_dra)
  gpuslice_unit_test(dra ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-dra.c)
  target_link_libraries(test-dra PRIVATE gpuslice_dra)
endif()
