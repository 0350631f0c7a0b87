# NVIDIA_REQUIRE_* expressions on real CUDA image strings, env rules, the CUDA ↔ driver table (src/compat).
gpuslice_unit_test(compat ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-compat.c)
