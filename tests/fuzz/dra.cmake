# The DRA driver's decoders (src/dra): the ResourceClaim (and the quantities in it), this driver's opaque
# parameters, and the journal's records.
foreach(t dra-claim dra-params dra-record)
  gpuslice_fuzz_target(${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-${t}.c)
  target_link_libraries(fuzz-${t} PRIVATE gpuslice_dra)
endforeach()
