/* SPDX-License-Identifier: Apache-2.0 */
/* cuda-errors — every CUresult of CUDA 13.0 with its name and, where the simulator knows it, the
 * driver's text (others read as their name). X(code, text). The compiler checks each code against
 * src/interposer/cuda-abi.h (itself checked against cuda.h where a toolkit is present), so a removed or
 * renamed code breaks the build instead of the table. */
#pragma once

#define SIM_CUDA_ERRORS(X)                                                                                      \
        X(CUDA_SUCCESS, "no error")                                                                             \
        X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                         \
        X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                            \
        X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                                   \
        X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                                     \
        X(CUDA_ERROR_PROFILER_DISABLED, NULL)                                                                   \
        X(CUDA_ERROR_PROFILER_NOT_INITIALIZED, NULL)                                                            \
        X(CUDA_ERROR_PROFILER_ALREADY_STARTED, NULL)                                                            \
        X(CUDA_ERROR_PROFILER_ALREADY_STOPPED, NULL)                                                            \
        X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")                                             \
        X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, NULL)                                                          \
        X(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable")                   \
        X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                           \
        X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                                  \
        X(CUDA_ERROR_DEVICE_NOT_LICENSED, NULL)                                                                 \
        X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                           \
        X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                                 \
        X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")                                        \
        X(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed")                                             \
        X(CUDA_ERROR_UNMAP_FAILED, NULL)                                                                        \
        X(CUDA_ERROR_ARRAY_IS_MAPPED, NULL)                                                                     \
        X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")                                                 \
        X(CUDA_ERROR_NO_BINARY_FOR_GPU, NULL)                                                                   \
        X(CUDA_ERROR_ALREADY_ACQUIRED, NULL)                                                                    \
        X(CUDA_ERROR_NOT_MAPPED, "resource not mapped")                                                         \
        X(CUDA_ERROR_NOT_MAPPED_AS_ARRAY, NULL)                                                                 \
        X(CUDA_ERROR_NOT_MAPPED_AS_POINTER, NULL)                                                               \
        X(CUDA_ERROR_ECC_UNCORRECTABLE, "uncorrectable ECC error encountered")                                  \
        X(CUDA_ERROR_UNSUPPORTED_LIMIT, NULL)                                                                   \
        X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "exclusive-thread device already in use by a different thread")    \
        X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices")         \
        X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")                                               \
        X(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, NULL)                                                            \
        X(CUDA_ERROR_NVLINK_UNCORRECTABLE, NULL)                                                                \
        X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, NULL)                                                              \
        X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, NULL)                                                             \
        X(CUDA_ERROR_JIT_COMPILATION_DISABLED, NULL)                                                            \
        X(CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY, NULL)                                                           \
        X(CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC, NULL)                                                            \
        X(CUDA_ERROR_CONTAINED, NULL)                                                                           \
        X(CUDA_ERROR_INVALID_SOURCE, NULL)                                                                      \
        X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                                          \
        X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, NULL)                                                      \
        X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, NULL)                                                           \
        X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS")                  \
        X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                                 \
        X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")                   \
        X(CUDA_ERROR_LOSSY_QUERY, NULL)                                                                         \
        X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                                       \
        X(CUDA_ERROR_NOT_READY, "device not ready")                                                             \
        X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")                               \
        X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")                        \
        X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")                                 \
        X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, NULL)                                                       \
        X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, NULL)                                                         \
        X(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, NULL)                                                             \
        X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context active")                                          \
        X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                                              \
        X(CUDA_ERROR_ASSERT, NULL)                                                                              \
        X(CUDA_ERROR_TOO_MANY_PEERS, NULL)                                                                      \
        X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, NULL)                                                      \
        X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, NULL)                                                          \
        X(CUDA_ERROR_HARDWARE_STACK_ERROR, NULL)                                                                \
        X(CUDA_ERROR_ILLEGAL_INSTRUCTION, NULL)                                                                 \
        X(CUDA_ERROR_MISALIGNED_ADDRESS, NULL)                                                                  \
        X(CUDA_ERROR_INVALID_ADDRESS_SPACE, NULL)                                                               \
        X(CUDA_ERROR_INVALID_PC, NULL)                                                                          \
        X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                                               \
        X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, NULL)                                                        \
        X(CUDA_ERROR_TENSOR_MEMORY_LEAK, NULL)                                                                  \
        X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                                  \
        X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                                  \
        X(CUDA_ERROR_SYSTEM_NOT_READY, NULL)                                                                    \
        X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination") \
        X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, NULL)                                                      \
        X(CUDA_ERROR_MPS_CONNECTION_FAILED, NULL)                                                               \
        X(CUDA_ERROR_MPS_RPC_FAILURE, NULL)                                                                     \
        X(CUDA_ERROR_MPS_SERVER_NOT_READY, NULL)                                                                \
        X(CUDA_ERROR_MPS_MAX_CLIENTS_REACHED, NULL)                                                             \
        X(CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED, NULL)                                                         \
        X(CUDA_ERROR_MPS_CLIENT_TERMINATED, NULL)                                                               \
        X(CUDA_ERROR_CDP_NOT_SUPPORTED, NULL)                                                                   \
        X(CUDA_ERROR_CDP_VERSION_MISMATCH, NULL)                                                                \
        X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, NULL)                                                          \
        X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, NULL)                                                          \
        X(CUDA_ERROR_STREAM_CAPTURE_MERGE, NULL)                                                                \
        X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, NULL)                                                            \
        X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, NULL)                                                             \
        X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, NULL)                                                            \
        X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, NULL)                                                             \
        X(CUDA_ERROR_CAPTURED_EVENT, NULL)                                                                      \
        X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, NULL)                                                         \
        X(CUDA_ERROR_TIMEOUT, "timeout expired")                                                                \
        X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, NULL)                                                           \
        X(CUDA_ERROR_EXTERNAL_DEVICE, NULL)                                                                     \
        X(CUDA_ERROR_INVALID_CLUSTER_SIZE, NULL)                                                                \
        X(CUDA_ERROR_FUNCTION_NOT_LOADED, NULL)                                                                 \
        X(CUDA_ERROR_INVALID_RESOURCE_TYPE, NULL)                                                               \
        X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, NULL)                                                      \
        X(CUDA_ERROR_KEY_ROTATION, NULL)                                                                        \
        X(CUDA_ERROR_UNKNOWN, "unknown error")
