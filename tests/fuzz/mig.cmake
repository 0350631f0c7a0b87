# MIG: the driver's mig-minors text (src/mig), layout files and the planner on them, the change journal and the
# agent's layout request file (src/migctl).
gpuslice_fuzz_target(mig-minors ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-mig-minors.c)
gpuslice_fuzz_target(mig-layouts ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-mig-layouts.c)
gpuslice_fuzz_target(mig-journal ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-mig-journal.c)
gpuslice_fuzz_target(mig-request ${CMAKE_CURRENT_SOURCE_DIR}/fuzz-mig-request.c)
