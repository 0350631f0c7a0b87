# The operator's monitoring artefacts (docs/monitoring.md): the alert rules with promtool (check, unit
# tests per alert, the PrometheusRule equal to the plain file) and the Grafana dashboard's every query
# answered by a real Prometheus scraping a real node agent and a real scheduler extender.
foreach(t rules dashboard)
  add_test(NAME monitoring-${t}
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_monitoring.py
                   --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} ${t})
  set_tests_properties(monitoring-${t} PROPERTIES TIMEOUT 180 LABELS "integration;monitoring")
endforeach()
