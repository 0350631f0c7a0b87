# Monitoring: attribution, Engine API parsing, metrics text, HTTP server, labels, sampler.
gpuslice_unit_test(monitor-cgroup ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-monitor-cgroup.c)
target_link_libraries(test-monitor-cgroup PRIVATE gpuslice_monitor)
foreach(t engine http metrics labels format cri)
  gpuslice_unit_test(monitor-${t} ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-monitor-${t}.c)
  target_link_libraries(test-monitor-${t} PRIVATE gpuslice_monitor)
endforeach()
# The sampler and the service against the NVML binding's fake node (defined in tests/unit/nvml.cmake,
# which is included after this file: the target is resolved at generation time).
gpuslice_unit_test(monitor-service ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-monitor-service.c)
target_link_libraries(test-monitor-service PRIVATE gpuslice_monitor)
target_compile_definitions(test-monitor-service PRIVATE FAKE_NVML_NODE="$<TARGET_FILE:fake-nvml-node>")
add_dependencies(test-monitor-service fake-nvml-node)
# The scrape formatter against the one it replaced, frozen in monitor-format-ref.c: byte-identical text.
gpuslice_unit_test(monitor-format-ref ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-monitor-format-ref.c
                   ${CMAKE_CURRENT_SOURCE_DIR}/unit/monitor-format-ref.c)
target_link_libraries(test-monitor-format-ref PRIVATE gpuslice_monitor)
