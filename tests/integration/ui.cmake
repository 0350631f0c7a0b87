# The operator page (docs/ui.md): the API over HTTP, and the page in headless Chromium (exit 77 =
# skipped when chromium is missing), both against `gpuslice scheduler` watching the API stand-in.
foreach(t api browser)
  add_test(NAME ui-${t}
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_ui.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} ${t})
  set_tests_properties(ui-${t} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "integration;scheduler;ui")
endforeach()
