#!/usr/bin/python3
"""A CRI runtime stand-in for gpuslice's monitor tests: serves runtime.v1.RuntimeService/ListContainers
(proto/cri-subset.proto, the upstream field numbers) on a unix socket with Debian's python3-grpcio,
stubs generated at run time with grpc_tools.

  cri_standin.py --proto-dir DIR --socket PATH [--container ID,STATE,NAMESPACE,POD,UID,NAME]...

STATE is running or exited. Prints "ready" when serving; stops on SIGTERM/SIGINT. Checks that the
request filters on running containers, as the monitor asks, and counts calls in PATH.calls."""
import argparse
import importlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent import futures

import grpc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--container", action="append", default=[])
    a = ap.parse_args()

    out = tempfile.mkdtemp(prefix="cri-stubs-")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + a.proto_dir, "--python_out=" + out,
                    "--grpc_python_out=" + out, os.path.join(a.proto_dir, "cri-subset.proto")], check=True)
    sys.path.insert(0, out)
    pb = importlib.import_module("cri_subset_pb2")
    pbg = importlib.import_module("cri_subset_pb2_grpc")

    containers = []
    for spec in a.container:
        cid, state, ns, pod, uid, name = spec.split(",")
        c = pb.Container(id=cid, pod_sandbox_id="sandbox-" + uid, metadata=pb.ContainerMetadata(name=name),
                         state=pb.CONTAINER_RUNNING if state == "running" else pb.CONTAINER_EXITED)
        c.labels["io.kubernetes.pod.name"] = pod
        c.labels["io.kubernetes.pod.namespace"] = ns
        c.labels["io.kubernetes.pod.uid"] = uid
        c.labels["io.kubernetes.container.name"] = name
        containers.append(c)

    calls = [0]

    class Runtime(pbg.RuntimeServiceServicer):
        def ListContainers(self, request, context):
            calls[0] += 1
            with open(a.socket + ".calls", "w") as f:
                f.write(str(calls[0]))
            if not request.filter.HasField("state") or request.filter.state.state != pb.CONTAINER_RUNNING:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected a running-state filter")
            # a real runtime applies the filter; we return everything so the client must check too
            return pb.ListContainersResponse(containers=containers)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pbg.add_RuntimeServiceServicer_to_server(Runtime(), server)
    server.add_insecure_port("unix:" + a.socket)
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    print("ready", flush=True)
    done.wait()
    server.stop(0)


if __name__ == "__main__":
    main()
