# Scheduler extender benchmark: filter+prioritize time and model memory at 100..5,000 nodes.
add_executable(sched-bench ${CMAKE_CURRENT_SOURCE_DIR}/sched-bench.c)
target_link_libraries(sched-bench PRIVATE gpuslice_sched)
