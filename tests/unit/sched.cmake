# Scheduler extender: cluster model + decisions (with the share fit of src/alloc), and the JSON codec.
gpuslice_unit_test(sched ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sched.c)
target_link_libraries(test-sched PRIVATE gpuslice_sched)
gpuslice_unit_test(sched-codec ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sched-codec.c)
target_link_libraries(test-sched-codec PRIVATE gpuslice_sched)
gpuslice_unit_test(sched-server ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sched-server.c)
target_link_libraries(test-sched-server PRIVATE gpuslice_sched)
gpuslice_unit_test(sched-view ${CMAKE_CURRENT_SOURCE_DIR}/unit/test-sched-view.c)
target_link_libraries(test-sched-view PRIVATE gpuslice_sched)
