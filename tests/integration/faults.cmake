# Fault injection on the fractional path (tests/faults/faults.py, docs/sharing.md "Crash safety"):
# the real agent SIGKILLed at named points under a pod stream from the kubelet stand-in, restarted
# on the same state dir, the stand-in's books checked. Short form here (30 kills); the long form
# is `make faults`.
if(TARGET gpuslice_agent)
  add_test(NAME faults-fractional
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/faults/faults.py --build ${CMAKE_BINARY_DIR}
                   --source ${CMAKE_SOURCE_DIR} --kills 30 --max-seconds 80
                   --topology ${GPUSLICE_TOPO_DIR}/seed000-8gpu-pcie-2socket.topo)
  set_tests_properties(faults-fractional PROPERTIES TIMEOUT 240 LABELS "integration;agent;sharing;faults")
endif()
