# Time-slicing from NVIDIA's device plugin config (tests/integration/test_timeslice.py): NVIDIA's examples as
# NVIDIA's plugin serves them, per-GPU mixing with whole GPUs and fractions (across a SIGKILL), refusals, the
# ConfigMap directory and the watch of its label and files; MPS (NVIDIA's client env and mounts, CDI, Podman
# running the answer, adoption after a SIGKILL).
if(TARGET gpuslice_agent)
  foreach(t example rename mixed mixed-mps mixed-modes refused configmap-dir metrics label label-watch annotation annotation-mps annotation-both mps mps-child-signals mps-hung mps-compute-mode mps-compute-mode-denied mps-cdi mps-podman sighup)
    add_test(NAME agent-timeslice-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_timeslice.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo ${t})
    set_tests_properties(agent-timeslice-${t} PROPERTIES TIMEOUT 150 LABELS "integration;agent;sharing")
  endforeach()
endif()
if(TARGET gpuslice_agent)
  # podman cases share the machine's container storage: one at a time; 77 = podman, runc or busybox missing
  set_tests_properties(agent-timeslice-mps-podman PROPERTIES RESOURCE_LOCK podman SKIP_RETURN_CODE 77)
endif()
