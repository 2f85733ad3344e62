#!/bin/sh
# ci/gpu_pack.sh (make gpu-pack): builds, on this machine (nvcc, no GPU), what
# ci/gpu_check.sh runs on a GPU machine that has the driver, nvcc and PyTorch
# but no package manager and no network, so the GPU's minutes go to running:
#   build-gpu/zinc, build-gpu/tests/{gpu_probe,test_kernels_gpu,bench_gpu}
#   build-gpu/lib: the Debian libraries they link that such a machine lacks
# Without MPI (no OpenMPI there). The device tool carries these five paths.
set -e
cd "$(git rev-parse --show-toplevel)"
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "gpu_pack.sh: needs nvcc (the CUDA toolkit)" >&2; exit 1; }
B=build-gpu
BINS="$B/zinc $B/tests/gpu_probe $B/tests/test_kernels_gpu $B/tests/bench_gpu"
make -s BUILD=$B MPICC= $BINS
if ldd $B/zinc | grep -q libmpi; then echo "gpu_pack.sh: $B/zinc links MPI; rm -rf $B and run again" >&2; exit 1; fi
rm -rf $B/lib && mkdir -p $B/lib
# every shared library the binaries link, less the C/C++ runtime every Linux has
for f in $BINS; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
while read -r name path; do
  case $name in libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*) continue ;; esac
  cp -L "$path" $B/lib/"$name"
done
ls $B/lib | tr '\n' ' ' | sed 's/^/gpu_pack.sh: carried libraries: /; s/ $/\n/'
du -ch $BINS $B/lib | tail -n 1 | awk '{ print "gpu_pack.sh: " $1 " to carry (the device takes 64 MiB with the tree)" }'
