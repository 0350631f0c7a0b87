# Kubernetes client (src/kube): the watch-event stream decoder, the kubeconfig parser.
foreach(t kube-watch kube-config)
  gpuslice_fuzz_target(${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-${t}.c)
  target_link_libraries(fuzz-${t} PRIVATE gpuslice_kube)
endforeach()
# The cluster codec (src/cluster): the node annotation's writer and reader, the pod annotations' writers
# and reader, and the cluster picture inspect reads from them (the model).
gpuslice_fuzz_target(cluster ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-cluster.c)
target_link_libraries(fuzz-cluster PRIVATE gpuslice_cluster gpuslice_sched)
