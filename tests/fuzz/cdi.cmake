# The ld.so.cache reader and the OCI hook's state / config.json readers (src/cdi) on arbitrary bytes.
gpuslice_fuzz_target(ldcache ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-ldcache.c)
target_link_libraries(fuzz-ldcache PRIVATE gpuslice_cdi)
gpuslice_fuzz_target(oci ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-oci.c)
target_link_libraries(fuzz-oci PRIVATE gpuslice_cdi)
