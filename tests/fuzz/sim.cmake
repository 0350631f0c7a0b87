# The simulator's shared node-state file (sim/state.c): a corrupt or foreign file is refused.
# state.c and node.c are compiled in (not gpuslice_sim_common) so the libFuzzer build instruments them.
gpuslice_fuzz_target(sim-state ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-sim-state.c ${CMAKE_SOURCE_DIR}/sim/state.c
                     ${CMAKE_SOURCE_DIR}/sim/node.c ${CMAKE_SOURCE_DIR}/sim/mig.c ${CMAKE_SOURCE_DIR}/sim/mig-node.c)
target_include_directories(fuzz-sim-state PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(fuzz-sim-state PRIVATE pthread)

# The simulator's `mig` node-description lines (sim/mig-node.c, with the device rules of sim/mig.c).
gpuslice_fuzz_target(sim-mig-node ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-sim-mig-node.c ${CMAKE_SOURCE_DIR}/sim/state.c
                     ${CMAKE_SOURCE_DIR}/sim/node.c ${CMAKE_SOURCE_DIR}/sim/mig.c ${CMAKE_SOURCE_DIR}/sim/mig-node.c)
target_include_directories(fuzz-sim-mig-node PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(fuzz-sim-mig-node PRIVATE pthread)

# The simulated MPS daemon's state file (sim/mps.c): an accepted state formats back and parses to itself.
gpuslice_fuzz_target(sim-mps ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-sim-mps.c ${CMAKE_SOURCE_DIR}/sim/mps.c)
target_include_directories(fuzz-sim-mps PRIVATE ${CMAKE_SOURCE_DIR})
