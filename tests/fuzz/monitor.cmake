# Monitoring parsers: /proc/PID/cgroup, Engine API JSON, the HTTP request path.
gpuslice_fuzz_target(cgroup ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-cgroup.c)
target_link_libraries(fuzz-cgroup PRIVATE gpuslice_monitor)
gpuslice_fuzz_target(engine ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-engine.c)
target_link_libraries(fuzz-engine PRIVATE gpuslice_monitor)
gpuslice_fuzz_target(http ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-http.c)
target_link_libraries(fuzz-http PRIVATE gpuslice_monitor)
