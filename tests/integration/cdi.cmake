# CDI spec generation, the OCI hook and `gpuslice check` on a fake node (mknod device nodes, an
# ld cache from ldconfig) and the simulated NVML; real Podman consumes the spec and runs the hook.
add_test(NAME cdi-local COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-cdi.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} local)
add_test(NAME cdi-podman COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-cdi.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} podman)
set_tests_properties(cdi-local cdi-podman PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "integration;cdi")
# podman cases share the machine's container storage: one at a time
set_tests_properties(cdi-podman PROPERTIES RESOURCE_LOCK podman)
# The node agent's Allocate names CDI devices that exist in the spec it wrote (kubelet stand-in).
if(TARGET gpuslice_agent)
  foreach(s uuid index reload warn shared)
    add_test(NAME cdi-agent-${s}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cdi_agent.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${CMAKE_SOURCE_DIR}/sim/nodes/demo-8gpu-2socket.node ${s})
    set_tests_properties(cdi-agent-${s} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "integration;cdi;agent")
  endforeach()
endif()
# CDI specs in the DaemonSet's layout: the agent inside a Podman container (deploy/kubernetes' mounts and flags, the
# init container's install of the hook), the specs naming host paths, Podman on the host running the fake driver's
# nvidia-smi through them — a DRA claim (kubelet DRA stand-in) and a device-plugin container (Allocate, cdi).
if(TARGET gpuslice_dra)
  foreach(s dra plugin)
    add_test(NAME cdi-host-${s}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_cdi_host.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${s})
    set_tests_properties(cdi-host-${s} PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "integration;cdi;dra"
                         RESOURCE_LOCK podman)
  endforeach()
endif()
