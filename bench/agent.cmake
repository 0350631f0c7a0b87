# Node agent benchmark (not a test): `cmake --build BUILD --target bench-agent`.
# Allocate / GetPreferredAllocation latency over the real socket, RSS with 8 and 64 simulated GPUs,
# idle CPU. This target prints; `bench/run.sh --only agent` writes docs/BENCHMARKS.md ("Node agent").
if(TARGET gpuslice_agent)
  add_custom_target(bench-agent
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/agent-bench.py --build ${CMAKE_BINARY_DIR}
            --source ${CMAKE_SOURCE_DIR} --topologies ${GPUSLICE_TOPO_DIR} --markdown
    DEPENDS gpuslice gpuslice_sim_nvml
    USES_TERMINAL)
endif()
