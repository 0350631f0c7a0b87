# ld cache reader, CDI kinds / versions / YAML, OCI state and config.json readers (src/cdi).
gpuslice_unit_test(cdi ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-cdi.c)
target_link_libraries(test-cdi PRIVATE gpuslice_cdi gpuslice_agent)
