# MIG through the real binary on the simulated node: topo/mig/ps (cli), CDI MIG devices (cdi, root).
foreach(m cli cdi)
  add_test(NAME mig-${m} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-mig.sh ${CMAKE_BINARY_DIR}
           ${CMAKE_SOURCE_DIR} ${m})
  set_tests_properties(mig-${m} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "integration;mig")
endforeach()
