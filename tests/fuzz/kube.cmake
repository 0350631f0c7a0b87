# Kubernetes client (src/kube): the watch-event stream decoder, the kubeconfig parser, and the node
# annotation / pod assignment readers.
foreach(t kube-watch kube-config kube-annotation)
  gpuslice_fuzz_target(${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-${t}.c)
  target_link_libraries(fuzz-${t} PRIVATE gpuslice_kube)
endforeach()
