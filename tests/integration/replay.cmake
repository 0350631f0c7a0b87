# `gpuslice replay` through the real binary (tests/integration/test_replay_cli.py): JSON, table, exit codes.
add_test(NAME cli-replay COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_replay_cli.py
                                 --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR})
set_tests_properties(cli-replay PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS integration)
