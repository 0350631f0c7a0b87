# libgpuslice-cuda.so benchmark programs (bench/interposer.sh runs them; results in docs/BENCHMARKS.md,
# section "interposer", written by `bench/run.sh --only interposer`). The workload they drive is tests/interposer/cuda-workload.
add_executable(interposer-memacc ${CMAKE_CURRENT_SOURCE_DIR}/interposer-memacc.c)
target_link_libraries(interposer-memacc PRIVATE gpuslice_cuda_abi ${CMAKE_DL_LIBS} m)
add_custom_target(bench-interposer
  COMMAND ${CMAKE_SOURCE_DIR}/bench/interposer.sh ${CMAKE_BINARY_DIR}
  DEPENDS interposer-memacc cuda-workload gpuslice gpuslice_cuda gpuslice_sim_cuda gpuslice_sim_nvml
  USES_TERMINAL)
