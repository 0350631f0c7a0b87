# Monitoring: attribution, Engine API parsing, metrics text, HTTP server, labels, sampler.
gpuslice_unit_test(monitor-cgroup ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-monitor-cgroup.c)
target_link_libraries(test-monitor-cgroup PRIVATE gpuslice_monitor)
foreach(t engine http metrics labels format cri)
  gpuslice_unit_test(monitor-${t} ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-monitor-${t}.c)
  target_link_libraries(test-monitor-${t} PRIVATE gpuslice_monitor)
endforeach()
