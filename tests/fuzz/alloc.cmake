# alloc_set_parse on arbitrary text, and alloc_pick_gpus on arbitrary small nodes and requests.
# alloc.c is compiled into the target so the libFuzzer build instruments it.
gpuslice_fuzz_target(alloc ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-alloc.c ${CMAKE_SOURCE_DIR}/src/alloc/alloc.c)
