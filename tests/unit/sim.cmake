# The simulator's tests: they load build/sim/*.so.1 by path (never link them), so they depend on
# the libraries being built. Some also link the simulator's state code to inject faults directly.
gpuslice_unit_test(sim-nvml ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sim-nvml.c)
add_dependencies(test-sim-nvml gpuslice_sim_nvml)

gpuslice_unit_test(sim-state ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sim-state.c)
target_link_libraries(test-sim-state PRIVATE gpuslice_sim_common)
add_dependencies(test-sim-state gpuslice_sim_nvml)

gpuslice_unit_test(sim-cli ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sim-cli.c)
add_dependencies(test-sim-cli gpuslice_sim_nvml gpuslice_sim_cli)

gpuslice_unit_test(sim-cuda ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sim-cuda.c)
target_link_libraries(test-sim-cuda PRIVATE gpuslice_cuda_abi)
add_dependencies(test-sim-cuda gpuslice_sim_nvml gpuslice_sim_cuda gpuslice_sim_workload)

gpuslice_unit_test(sim-mig ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sim-mig.c)
target_link_libraries(test-sim-mig PRIVATE gpuslice_sim_common gpuslice_cuda_abi)
add_dependencies(test-sim-mig gpuslice_sim_nvml gpuslice_sim_cuda gpuslice_sim_cli)
