# `gpuslice replay`'s input: the openb node and pod lists (src/sched/replay.c), and small runs of them.
gpuslice_fuzz_target(trace ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-trace.c)
target_link_libraries(fuzz-trace PRIVATE gpuslice_sched)
