# Monitoring end to end (tests/integration/test-monitor.sh): the simulated seed 002 node, promtool,
# a prometheus server, podman containers and `podman system service`. A case exits 77 (skipped)
# only when a tool it needs is not installed; .ci/run installs them (podman runc busybox-static
# prometheus).
set(_monitor_cases seed-metrics seed-follows-changes seed-compat seed-ps cri-names promtool prometheus prometheus-agent labels
    podman-names podman-workload podman-workload-pidns podman-alloc engine-down)
foreach(c ${_monitor_cases})
  add_test(NAME monitor-${c}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-monitor.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${c})
  set_tests_properties(monitor-${c} PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "integration;monitor")
endforeach()
# podman cases share the machine's container storage: one at a time
set_tests_properties(monitor-podman-names monitor-podman-workload monitor-podman-workload-pidns monitor-podman-alloc
                     PROPERTIES RESOURCE_LOCK podman)
