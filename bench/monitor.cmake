# Monitor benchmark (not a test): `cmake --build BUILD --target bench-monitor`. Scrape cost with
# 8 GPUs x 256 processes (the formatter against the one it replaced, tests/unit/monitor-format-ref.c, in the
# same run), sample cost and memory against the simulated node. Results go to
# docs/BENCHMARKS.md through `bench/run.sh --only monitor` (bench/monitor.sh); this target only prints.
add_executable(monitor-bench ${CMAKE_CURRENT_SOURCE_DIR}/monitor-bench.c
               ${CMAKE_SOURCE_DIR}/tests/unit/monitor-format-ref.c)
target_link_libraries(monitor-bench PRIVATE gpuslice_everything)
add_custom_target(bench-monitor
  COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/sim
          GPUSLICE_SIM_NODE=${CMAKE_SOURCE_DIR}/tests/integration/monitor-seed002.node
          GPUSLICE_SIM_STATE=${CMAKE_BINARY_DIR}/monitor-bench.state
          GPUSLICE_BENCH_SIM_CLI=${CMAKE_BINARY_DIR}/sim/gpuslice-sim
          $<TARGET_FILE:monitor-bench> --markdown
  DEPENDS monitor-bench gpuslice_sim_nvml gpuslice_sim_cli
  USES_TERMINAL)
