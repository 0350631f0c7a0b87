# libgpuslice-cuda.so: limits-file parser and shared-region unit tests, and end-to-end tests that run
# tests/interposer/cuda-workload (a CUDA driver API program) under the interposer against the
# simulated driver build/sim/libcuda.so.1.
gpuslice_unit_test(interposer-limits ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-interposer-limits.c)
gpuslice_unit_test(interposer-region ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-interposer-region.c
                   ${CMAKE_SOURCE_DIR}/src/interposer/region.c ${CMAKE_SOURCE_DIR}/src/interposer/throttle.c
                   ${CMAKE_SOURCE_DIR}/src/interposer/alloc-table.c)

# The interposer, the simulated driver and these programs build from cuda-abi.h: no CUDA toolkit needed.
add_executable(cuda-workload ${CMAKE_CURRENT_SOURCE_DIR}/interposer/cuda-workload.c)
target_link_libraries(cuda-workload PRIVATE gpuslice_cuda_abi gpuslice_nvml_abi ${CMAKE_DL_LIBS} pthread)
# The same program linked against the driver (DT_NEEDED libcuda.so.1), as programs built with -lcuda are.
add_executable(cuda-workload-linked ${CMAKE_CURRENT_SOURCE_DIR}/interposer/cuda-workload.c)
target_compile_definitions(cuda-workload-linked PRIVATE WORKLOAD_LINKED)
target_link_libraries(cuda-workload-linked PRIVATE gpuslice_sim_cuda gpuslice_cuda_abi gpuslice_nvml_abi ${CMAKE_DL_LIBS} pthread)

# Replays a CUDA runtime's cuGetProcAddress lookups (cudart-13.0-lookups.txt) and says what came back.
add_executable(procaddr-replay ${CMAKE_CURRENT_SOURCE_DIR}/interposer/procaddr-replay.c)
target_link_libraries(procaddr-replay PRIVATE ${CMAKE_DL_LIBS})

gpuslice_unit_test(interposer ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-interposer.c
                   ${CMAKE_SOURCE_DIR}/src/interposer/region.c)
add_dependencies(test-interposer gpuslice_cuda gpuslice_sim_cuda gpuslice_sim_nvml gpuslice_sim_cupti cuda-workload cuda-workload-linked gpuslice procaddr-replay
                 gpuslice_nvml_shim)
# The NVML stand-in's layout as the agent mounts it: build/nvml/lib/libnvidia-ml.so.1 (libgpuslice-nvml.so)
# and the real — here the simulated — NVML at build/nvml/driver/libnvidia-ml.so.1.
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/nvml/driver)
file(CREATE_LINK ../../sim/libnvidia-ml.so.1 ${CMAKE_BINARY_DIR}/nvml/driver/libnvidia-ml.so.1 SYMBOLIC)
set_tests_properties(unit-interposer PROPERTIES TIMEOUT 180)

# The exported symbol set is the CUDA driver's (the repository's list, tests/data/cuda/; gen-passthrough.sh
# keeps passthrough.h so). Where a toolkit is present, its link stub is checked against that list as well.
set(GPUSLICE_CUDA_EXPORTS ${CMAKE_SOURCE_DIR}/tests/data/cuda/driver-13.0-exports.txt)
set(stub_arg "")
if(GPUSLICE_CUDA_TOOLKIT AND EXISTS ${GPUSLICE_CUDA_TOOLKIT}/lib64/stubs/libcuda.so)
  set(stub_arg ${GPUSLICE_CUDA_TOOLKIT}/lib64/stubs/libcuda.so)
endif()
add_test(NAME interposer-exports COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/interposer/check-exports.sh
         $<TARGET_FILE:gpuslice_cuda> ${GPUSLICE_CUDA_EXPORTS} ${stub_arg})
add_test(NAME interposer-passthrough-current COMMAND ${CMAKE_SOURCE_DIR}/src/interposer/gen-passthrough.sh
         --check ${GPUSLICE_CUDA_EXPORTS})

# The glibc floor: libgpuslice-cuda.so loads on glibc 2.17 (no newer symbol version, no dependency beyond
# libc/libdl/libpthread). Sanitizer builds link their runtimes and are exempt. The second test shows the
# check fails on a library built without the floor (the simulated driver needs GLIBC_2.34).
if(NOT GPUSLICE_SANITIZE)
  add_test(NAME interposer-glibc-floor COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/interposer/check-glibc-floor.sh
           $<TARGET_FILE:gpuslice_cuda> 2.17)
  add_test(NAME interposer-glibc-floor-detects COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/interposer/check-glibc-floor.sh
           $<TARGET_FILE:gpuslice_sim_cuda> 2.17)
  set_tests_properties(interposer-glibc-floor-detects PROPERTIES WILL_FAIL TRUE)
endif()

# End to end compute limit: the agent's Allocate answer for a 30 % core share applied to a real Podman
# container running cuda-workload; its SM share is read from the host through the simulated NVML
# (exit 77 = skipped when podman, runc or busybox are missing).
if(TARGET gpuslice_agent)
  add_test(NAME interposer-podman-core
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/interposer/test_podman_core.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo podman-core)
  # pynvml's view: a private NVML handle in a Podman container under the agent's answer reads the limit (the
  # stand-in the answer mounts), and without the stand-in's mounts the whole GPU.
  add_test(NAME interposer-podman-nvml
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/interposer/test_podman_core.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo podman-nvml)
  set_tests_properties(interposer-podman-core interposer-podman-nvml PROPERTIES TIMEOUT 150 SKIP_RETURN_CODE 77
                       LABELS "integration;interposer" RESOURCE_LOCK podman)
  # Fail closed: the agent's wiring, a cleared environment, the interposer at the driver's place, an
  # unloadable interposer and a missing limits file, each in a real Podman container.
  add_test(NAME interposer-podman-failclosed
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/interposer/test_podman_failclosed.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR}
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo)
  set_tests_properties(interposer-podman-failclosed PROPERTIES TIMEOUT 170 SKIP_RETURN_CODE 77
                       LABELS "integration;interposer" RESOURCE_LOCK podman)
endif()

# No CUDA toolkit needed: a tree configured with the toolkit hidden registers the same tests as this one.
add_test(NAME interposer-no-toolkit COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/interposer/no-toolkit.sh ${CMAKE_SOURCE_DIR}
         ${CMAKE_BINARY_DIR})
set_tests_properties(interposer-no-toolkit PROPERTIES TIMEOUT 300)
