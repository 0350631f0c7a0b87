# The Python gRPC stubs every Python test, stand-in and benchmark uses (kubelet_standin.load_stubs), generated
# once per build from proto/ with grpc_tools into BUILD/python-stubs (part of `all`).
set(_py_stub_dir ${CMAKE_BINARY_DIR}/python-stubs)
set(_py_stubs "")
set(_py_protos deviceplugin podresources cri-subset pluginregistration dra-v1 dra-v1beta1 dra-health-v1
    dra-health-v1alpha1)
foreach(p ${_py_protos})
  string(REPLACE "-" "_" m ${p})
  list(APPEND _py_stubs ${_py_stub_dir}/${m}_pb2.py ${_py_stub_dir}/${m}_pb2_grpc.py)
endforeach()
set(_py_proto_files "")
foreach(p ${_py_protos})
  list(APPEND _py_proto_files ${CMAKE_SOURCE_DIR}/proto/${p}.proto)
endforeach()
add_custom_command(
  OUTPUT ${_py_stubs}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_py_stub_dir}
  COMMAND /usr/bin/python3 -m grpc_tools.protoc -I${CMAKE_SOURCE_DIR}/proto --python_out=${_py_stub_dir}
          --grpc_python_out=${_py_stub_dir} ${_py_proto_files}
  DEPENDS ${_py_proto_files}
  COMMENT "Python gRPC stubs (grpc_tools) into python-stubs/")
add_custom_target(python-stubs ALL DEPENDS ${_py_stubs})
