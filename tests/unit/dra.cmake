# The DRA driver (src/dra): names, versions, quantities, slices (MIG nodes of the simulator too), the decoders,
# the engine in a private dir.
if(TARGET gpuslice_dra)
  gpuslice_unit_test(dra ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-dra.c)
  target_link_libraries(test-dra PRIVATE gpuslice_dra gpuslice_nvml)
  # MIG nodes through the simulated NVML (build/sim/libnvidia-ml.so.1) and gpuslice-sim caps
  foreach(_sim_target gpuslice_sim_nvml gpuslice_sim_cli)
    if(TARGET ${_sim_target})
      add_dependencies(test-dra ${_sim_target})
    endif()
  endforeach()
endif()
