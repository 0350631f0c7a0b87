# The MIG model and planner (src/mig, pure) and the declared layouts (src/migctl: layout files, journal,
# the applier against the simulator, killed at every step).
gpuslice_unit_test(mig ${CMAKE_CURRENT_LIST_DIR}/test-mig.c)
gpuslice_unit_test(migctl ${CMAKE_CURRENT_LIST_DIR}/test-migctl.c)
foreach(_sim_target gpuslice_sim_nvml gpuslice_sim_cli)
  if(TARGET ${_sim_target})
    add_dependencies(test-migctl ${_sim_target})
  endif()
endforeach()
