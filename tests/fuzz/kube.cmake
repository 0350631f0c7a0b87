# Kubernetes client (src/kube): the watch-event stream decoder, the kubeconfig parser; and the cluster
# picture inspect reads (kube-annotation: the node annotation's writer and the one reader, the model).
foreach(t kube-watch kube-config kube-annotation)
  gpuslice_fuzz_target(${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-${t}.c)
  target_link_libraries(fuzz-${t} PRIVATE gpuslice_kube gpuslice_sched)
endforeach()
