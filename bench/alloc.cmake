# Allocator benchmark: quality (single requests, churn) against baselines, and decision time.
add_executable(alloc-bench ${CMAKE_CURRENT_SOURCE_DIR}/alloc-bench.c)
target_link_libraries(alloc-bench PRIVATE gpuslice_everything)
target_compile_definitions(alloc-bench PRIVATE GPUSLICE_TOPO_DIR="${GPUSLICE_TOPO_DIR}")
