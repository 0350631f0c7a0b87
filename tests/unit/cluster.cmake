# The cluster codec (src/cluster): annotations and the request classifier.
gpuslice_unit_test(cluster ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-cluster.c)
target_link_libraries(test-cluster PRIVATE gpuslice_cluster)
