# The simulator's tests: they load build/sim/*.so.1 by path (never link them), so they depend on
# the libraries being built. Some also link the simulator's state code to inject faults directly.
gpuslice_unit_test(sim-nvml ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sim-nvml.c)
add_dependencies(test-sim-nvml gpuslice_sim_nvml)
