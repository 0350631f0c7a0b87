#!/usr/bin/env bash
# Build a fake GPU node for the CDI / hook tests, for real (run as root):
#   DIR/dev/nvidia0..N-1 (char 195:minor), nvidiactl (195:255), nvidia-modeset (195:254),
#   nvidia-uvm / nvidia-uvm-tools (char 511:0 / 511:1) made with mknod;
#   DIR/driver: ELF shared objects lib*.so.<driver> with their sonames (built by cc), another driver
#   version's libcuda (must be ignored), nvidia-smi, a persistenced socket, and an ld cache made by
#   `ldconfig -r DIR/driver` (which also creates the soname links, as a driver install does);
#   DIR/node: a node description with the driver and CUDA versions and brand.
# Usage: cdi-fixture.sh DIR N_GPUS DRIVER CUDA BRAND
set -euo pipefail
dir=$1 n=$2 driver=$3 cuda=$4 brand=$5
mkdir -p "$dir/dev" "$dir/driver/usr/lib/x86_64-linux-gnu" "$dir/driver/usr/bin" "$dir/driver/etc" \
  "$dir/driver/run/nvidia-persistenced"
for ((i = 0; i < n; i++)); do mknod -m 666 "$dir/dev/nvidia$i" c 195 "$i"; done
mknod -m 666 "$dir/dev/nvidiactl" c 195 255
mknod -m 666 "$dir/dev/nvidia-modeset" c 195 254
mknod -m 666 "$dir/dev/nvidia-uvm" c 511 0
mknod -m 666 "$dir/dev/nvidia-uvm-tools" c 511 1
lib=$dir/driver/usr/lib/x86_64-linux-gnu
echo 'int gpuslice_fake_driver_symbol;' > "$dir/empty.c"
so() { cc -shared -fPIC -Wl,-soname,"$2" -o "$lib/$1" "$dir/empty.c"; }
so "libcuda.so.$driver" libcuda.so.1
so "libnvidia-ml.so.$driver" libnvidia-ml.so.1
so "libnvidia-ptxjitcompiler.so.$driver" libnvidia-ptxjitcompiler.so.1
so "libnvidia-encode.so.$driver" libnvidia-encode.so.1
so "libnvidia-eglcore.so.$driver" "libnvidia-eglcore.so.$driver"
so "libz-not-nvidia.so.1.2.3" libz-not-nvidia.so.1
mkdir -p "$dir/driver/old"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$dir/driver/old/libcuda.so.470.57.02" "$dir/empty.c"
printf '#!/bin/sh\necho fake nvidia-smi\n' > "$dir/driver/usr/bin/nvidia-smi"
chmod 755 "$dir/driver/usr/bin/nvidia-smi"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$dir/driver/run/nvidia-persistenced/socket"
printf '/usr/lib/x86_64-linux-gnu\n/old\n' > "$dir/driver/etc/ld.so.conf"
ldconfig -r "$dir/driver"
{
  printf ' '
  for ((i = 0; i < n; i++)); do printf '\tGPU%d' "$i"; done
  printf '\n'
  for ((i = 0; i < n; i++)); do
    printf 'GPU%d' "$i"
    for ((j = 0; j < n; j++)); do if ((i == j)); then printf '\t X '; else printf '\tPIX'; fi; done
    printf '\n'
  done
  printf 'node driver=%s cuda=%s\ndefault brand=%s\n' "$driver" "$cuda" "$brand"
} > "$dir/node"
