# Messages from peers the agent and the monitor do not control: the container runtime's CRI
# ListContainers answer (src/monitor/cri.c) and kubelet's PodResources List answer as the node
# agent reconciles it into its state (src/agent/podsync.c → state_reconcile).
gpuslice_fuzz_target(cri ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-cri.c)
target_link_libraries(fuzz-cri PRIVATE gpuslice_monitor)
if(TARGET gpuslice_rpc)
  gpuslice_fuzz_target(podres ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-podres.c)
  target_sources(fuzz-podres PRIVATE ${CMAKE_SOURCE_DIR}/src/agent/podres.c)
  target_link_libraries(fuzz-podres PRIVATE gpuslice_rpc)
endif()
