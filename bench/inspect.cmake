# Kubernetes client and `gpuslice inspect` (bench/inspect.sh): decoder throughput and cache memory
# (inspect-kube-bench), inspect over 1,000 nodes x 8 GPUs and 20,000 pods (bench/inspect_bench.py).
if(TARGET gpuslice_kube)
  add_executable(inspect-kube-bench ${CMAKE_CURRENT_SOURCE_DIR}/inspect-kube-bench.c)
  target_link_libraries(inspect-kube-bench PRIVATE gpuslice_kube)
endif()
