# NVML binding tests (owned by the NVML binding work).
#
# test-nvml: against small fake NVML libraries (tests/unit/fake-nvml/) for old-driver fallbacks
# and error paths no simulator produces. test-nvml-sim: against the simulator (sim/).

set(_fake_nvml_dir ${CMAKE_CURRENT_LIST_DIR}/fake-nvml)
foreach(_fake node old noinit initfail noshutdown nolinktype)
  set(_src ${_fake_nvml_dir}/fake-nvml-${_fake}.c)
  if(_fake STREQUAL "noshutdown")
    set(_src ${_fake_nvml_dir}/fake-nvml-initfail.c)
  elseif(_fake STREQUAL "nolinktype")
    set(_src ${_fake_nvml_dir}/fake-nvml-node.c)
  endif()
  add_library(fake-nvml-${_fake} SHARED ${_src})
  set_target_properties(fake-nvml-${_fake} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/fake-nvml
    C_VISIBILITY_PRESET default)
  target_include_directories(fake-nvml-${_fake} PRIVATE ${_fake_nvml_dir})
  target_link_libraries(fake-nvml-${_fake} PRIVATE gpuslice_nvml_abi)
  if(GPUSLICE_SHARED_LINK_FLAGS)
    target_link_options(fake-nvml-${_fake} PRIVATE ${GPUSLICE_SHARED_LINK_FLAGS})
  endif()
endforeach()
target_compile_definitions(fake-nvml-noshutdown PRIVATE FAKE_NO_SHUTDOWN)
# The fake node as a driver before 460: no nvmlDeviceGetNvLinkRemoteDeviceType.
target_compile_definitions(fake-nvml-nolinktype PRIVATE FAKE_NO_REMOTE_DEVICE_TYPE)

gpuslice_unit_test(nvml ${CMAKE_CURRENT_LIST_DIR}/test-nvml.c)
target_include_directories(test-nvml PRIVATE ${_fake_nvml_dir})
target_compile_definitions(test-nvml PRIVATE
  FAKE_NVML_NODE="$<TARGET_FILE:fake-nvml-node>"
  FAKE_NVML_OLD="$<TARGET_FILE:fake-nvml-old>"
  FAKE_NVML_NOINIT="$<TARGET_FILE:fake-nvml-noinit>"
  FAKE_NVML_INITFAIL="$<TARGET_FILE:fake-nvml-initfail>"
  FAKE_NVML_NOSHUTDOWN="$<TARGET_FILE:fake-nvml-noshutdown>"
  FAKE_NVML_NOLINKTYPE="$<TARGET_FILE:fake-nvml-nolinktype>")
add_dependencies(test-nvml fake-nvml-node fake-nvml-old fake-nvml-noinit fake-nvml-initfail fake-nvml-noshutdown
                 fake-nvml-nolinktype)

gpuslice_unit_test(nvml-sim ${CMAKE_CURRENT_LIST_DIR}/test-nvml-sim.c)
foreach(_sim_target gpuslice_sim_nvml gpuslice_sim_cli)
  if(TARGET ${_sim_target})
    add_dependencies(test-nvml-sim ${_sim_target})
  endif()
endforeach()
# The same tests through the default soname on the library search path, as production loads it.
add_test(NAME unit-nvml-sim-soname COMMAND test-nvml-sim)
set_tests_properties(unit-nvml-sim-soname PROPERTIES
  ENVIRONMENT "LD_LIBRARY_PATH=${CMAKE_BINARY_DIR}/sim;GPUSLICE_TEST_DEFAULT_SONAME=1")
