# NVIDIA's device plugin config file (src/nvconfig): NVIDIA's documented examples, refusals by key, malformed
# files, the ConfigMap entry chosen by the node label.
gpuslice_unit_test(nvconfig ${CMAKE_CURRENT_LIST_DIR}/test-nvconfig.c)
