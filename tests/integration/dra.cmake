# The DRA driver (`gpuslice node --dra`, src/dra) against the kubelet DRA stand-in (kubelet_standin.DraKubelet,
# real gRPC) and the API stand-in's resource.k8s.io (kube_standin.py, validating as kube-apiserver 1.36):
# registration in v1 and v1beta1, ResourceSlices, prepare/unprepare (MIG devices too), restarts, SIGKILLs at each
# step, health,
# the device plugin beside it (tests/integration/test_dra.py). Needs root (mknod).
if(TARGET gpuslice_dra)
  set(_dra_tests register slices slices-writes slices-v1beta1 slices-gates prepare-whole prepare-shared prepare-errors claim-status extended
      prepare-restart health coexist inspect prepare-timeslice prepare-mps prepare-sharing-errors)
  # on a node with MIG GPUs beside others (H100s with instances, MIG off, a V100): MIG claims, and the kills
  # with whole, shared and MIG claims
  set(_dra_mig_tests prepare-mig prepare-mig-shared prepare-kills coexist-mig)
  # on the simulated node the real Kubernetes 1.36 run used (tests/data/dra/real-1.36 has what it stored)
  set(_dra_recorded_tests recorded)
  foreach(t ${_dra_tests} ${_dra_mig_tests} ${_dra_recorded_tests})
    set(_topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo)
    if(t IN_LIST _dra_mig_tests)
      set(_topology ${CMAKE_SOURCE_DIR}/tests/data/mig/h100-mixed.node)
    elseif(t IN_LIST _dra_recorded_tests)
      set(_topology ${CMAKE_SOURCE_DIR}/tests/data/dra/nvlink-pairs.topo)
    endif()
    add_test(NAME dra-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_dra.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} --topology ${_topology} ${t})
    set_tests_properties(dra-${t} PROPERTIES TIMEOUT 300 LABELS "integration;dra")
  endforeach()
  # Dynamic MIG partitioning (tests/integration/test_dra_mig.py): an A100 40GB node (one GPU dynamic, one static
  # layout) and the H100 node (dynamic GPUs empty and with instances beside a static one); the kills on the H100 node.
  foreach(t dynamic:a100-40gb-dynamic dynamic:h100-mixed dynamic-kills:h100-mixed)
    string(REPLACE ":" ";" _parts ${t})
    list(GET _parts 0 _name)
    list(GET _parts 1 _node)
    set(_test dra-mig-${_name})
    if(NOT _name STREQUAL "dynamic-kills")
      set(_test dra-mig-${_name}-${_node})
    endif()
    add_test(NAME ${_test}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_dra_mig.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                     --topology ${CMAKE_SOURCE_DIR}/tests/data/mig/${_node}.node ${_name})
    set_tests_properties(${_test} PROPERTIES TIMEOUT 300 LABELS "integration;dra")
  endforeach()
  # The DeviceClasses and example claims of deploy/dra evaluated by a real CEL implementation
  # (@bufbuild/cel, vendored in tests/integration/cel/vendor) on the slices of four simulated nodes.
  add_test(NAME dra-cel
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_dra_cel.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo)
  set_tests_properties(dra-cel PROPERTIES TIMEOUT 300 LABELS "integration;dra")
endif()
