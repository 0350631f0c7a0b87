# The NVML binding's text helpers (bus ids from the driver → sysfs paths, CPU affinity lists).
gpuslice_fuzz_target(nvml-busid ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-nvml-busid.c)
