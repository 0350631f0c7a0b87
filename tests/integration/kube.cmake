# Kubernetes client against the API server stand-in (tests/integration/kube_standin.py) for what the
# real kube-apiserver cannot do on demand: watch streams cut mid-event, 410 at will, 429/500 bursts,
# hung responses; and the agents of 3 simulated nodes publishing, read back by `gpuslice inspect`.
# The same paths against the real kube-apiserver are tests/e2e/test_kube_*.py (make e2e).
if(TARGET gpuslice_kube)
  add_executable(kube-informer-probe ${CMAKE_CURRENT_SOURCE_DIR}/integration/kube-informer-probe.c)
  target_link_libraries(kube-informer-probe PRIVATE gpuslice_kube)
  add_executable(kube-write-probe ${CMAKE_CURRENT_SOURCE_DIR}/integration/kube-write-probe.c)
  target_link_libraries(kube-write-probe PRIVATE gpuslice_kube)
  set(_kube_tests informer-cut informer-410 informer-burst informer-hang informer-paging publish-inspect
      publish-recover publish-node-name inspect-errors writes)
  foreach(t ${_kube_tests})
    add_test(NAME kube-${t}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_kube.py
                     --build ${CMAKE_BINARY_DIR} --source ${CMAKE_SOURCE_DIR} ${t})
    set_tests_properties(kube-${t} PROPERTIES TIMEOUT 150 LABELS "integration;kube")
  endforeach()
  add_dependencies(kube-informer-probe gpuslice kube-write-probe)
endif()

# deploy/kubernetes is rendered with `kubectl kustomize` and checked by tests/e2e/test_kube_api.py
# (test_deploy_manifests, using tests/integration/test_deploy_kube.py): kubectl is the one `make e2e`
# builds, which a fresh CI machine has only once `make e2e` ran. deploy-kube runs the same checks (RBAC, the DRA
# patch, the CDI specs' host paths) with every kubectl found: Debian's, or that one; none is a skip (77).
add_test(NAME deploy-kube COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/integration/test_deploy_kube.py
         --source ${CMAKE_SOURCE_DIR})
set_tests_properties(deploy-kube PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 LABELS "integration;deploy")
