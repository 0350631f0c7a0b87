# `gpuslice scheduler` over HTTP(S): verbs on a snapshot, TLS with client certificates, usage, MIG placement, the one-node filter answer.
foreach(t verbs filter-best tls usage deploy mig)
  add_test(NAME scheduler-${t}
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_scheduler.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} ${t})
  set_tests_properties(scheduler-${t} PROPERTIES TIMEOUT 120 LABELS "integration;scheduler")
endforeach()
