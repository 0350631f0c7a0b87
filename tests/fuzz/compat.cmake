# NVIDIA_REQUIRE_* expressions and container environments (src/compat) on arbitrary bytes.
gpuslice_fuzz_target(compat ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-compat.c)
