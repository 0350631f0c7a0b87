# Kubernetes client against the API server stand-in (tests/integration/kube_standin.py) for what the
# real kube-apiserver cannot do on demand: watch streams cut mid-event, 410 at will, 429/500 bursts,
# hung responses; and the agents of 3 simulated nodes publishing, read back by `gpuslice inspect`.
# The same paths against the real kube-apiserver are tests/e2e/test_kube_*.py (make e2e).
if(TARGET gpuslice_kube)
  add_executable(kube-informer-probe ${CMAKE_CURRENT_SOURCE_DIR}/integration/kube-informer-probe.c)
  target_link_libraries(kube-informer-probe PRIVATE gpuslice_kube)
  set(_kube_tests informer-cut informer-410 informer-burst informer-hang informer-paging publish-inspect
      publish-recover inspect-errors)
  foreach(t ${_kube_tests})
    add_test(NAME kube-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_kube.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} ${t})
    set_tests_properties(kube-${t} PROPERTIES TIMEOUT 150 LABELS "integration;kube")
  endforeach()
  add_dependencies(kube-informer-probe gpuslice)
endif()

# deploy/kubernetes: the kustomization renders and holds the agent's least-privilege RBAC.
add_test(NAME deploy-kustomize-rbac
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_deploy_kube.py ${CMAKE_SOURCE_DIR})
set_tests_properties(deploy-kustomize-rbac PROPERTIES TIMEOUT 150 LABELS "integration;kube")
