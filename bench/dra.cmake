# The DRA scheduler's first-fit pick of a multi-GPU claim next to the allocator's, by ring bandwidth
# (docs/dra.md, "Multi-GPU claims"). Quality numbers only, no timing.
add_executable(dra-pick ${CMAKE_CURRENT_SOURCE_DIR}/dra-pick.c)
target_link_libraries(dra-pick PRIVATE gpuslice_everything gpuslice_dra)
target_compile_definitions(dra-pick PRIVATE GPUSLICE_TOPO_DIR="${GPUSLICE_TOPO_DIR}"
                           GPUSLICE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
