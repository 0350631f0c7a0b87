# The Prometheus text builder (src/metrics) with label values from workloads and peers.
gpuslice_fuzz_target(metrics ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-metrics.c)
target_link_libraries(fuzz-metrics PRIVATE gpuslice_monitor)
