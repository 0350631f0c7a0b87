# GPU sharing in the node agent (tests/integration/test_share.py): fractional resources of every
# profile, placement and pairing of a container's core and memory, refusals, whole/fraction
# exclusion, restart from PodResources, and the Allocate answer applied to a real Podman container
# (exit 77 = skipped when podman, runc or busybox are missing).
if(TARGET gpuslice_agent)
  set(_share_tests share-register-gpuslice share-register-tencent share-register-aliyun share-pair-core-first
      share-pair-memory-first share-binpack share-spread share-frag share-whole-cores share-reject share-exclusion
      share-restart share-restart-no-record share-metrics share-metrics-no-compat share-podman share-grace)
  foreach(t ${_share_tests})
    add_test(NAME agent-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_share.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${t})
    set_tests_properties(agent-${t} PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77 LABELS "integration;agent;sharing")
  endforeach()
  # podman cases share the machine's container storage: one at a time
  set_tests_properties(agent-share-podman PROPERTIES RESOURCE_LOCK podman)
endif()
