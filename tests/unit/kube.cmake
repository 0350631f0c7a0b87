# Kubernetes client (src/kube) and the node publisher's pure parts (src/agent/publish.c).
if(TARGET gpuslice_agent)
  gpuslice_unit_test(kube ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-kube.c)
  target_link_libraries(test-kube PRIVATE gpuslice_agent gpuslice_kube)
endif()
