# Scheduler extender codec (ExtenderArgs, binding args, pods, node annotation, snapshots) + decisions.
gpuslice_fuzz_target(sched ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-sched.c)
target_link_libraries(fuzz-sched PRIVATE gpuslice_sched)
