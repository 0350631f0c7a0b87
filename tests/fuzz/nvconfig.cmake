# NVIDIA's device plugin config file (src/nvconfig) on arbitrary bytes.
gpuslice_fuzz_target(nvconfig ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-nvconfig.c)
