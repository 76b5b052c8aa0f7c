#!/bin/sh
# gpu-bundle.sh — pack the CUDA build (`make cuda`) with the shared libraries it needs that a bare
# GPU host may lack, for scripts/gpu-check.sh (GPU_BUNDLE=...) and for running frugal-cuda there:
#   OUT.tar.xz: gpu-check gpu-bench gpu-e2e gpu-vision gpu-whisper gpu-vl-bench gpu-onnx gpu-ppocr frugal-cuda
#   loadgen lib/*.so*
# The C library, the dynamic loader, the CUDA driver and the CUDA toolkit libraries (cuBLAS, cuDNN)
# are left out: a GPU host has its own.
# Usage: scripts/gpu-bundle.sh OUT.tar.xz
set -eu
out=${1:?usage: gpu-bundle.sh OUT.tar.xz}
j=$(nproc 2>/dev/null || echo 2)
make -j"$j" cuda >/dev/null
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread bench/loadgen.c -o build/loadgen -lm
dir=$(mktemp -d)
mkdir -p "$dir/lib"
for b in build-cuda/gpu-check build-cuda/gpu-bench build-cuda/gpu-e2e build-cuda/gpu-vision build-cuda/gpu-whisper build-cuda/gpu-vl-bench build-cuda/gpu-onnx build-cuda/gpu-ppocr build-cuda/frugal-cuda build/loadgen; do
    [ -x "$b" ] || continue
    cp "$b" "$dir/" && strip "$dir/$(basename "$b")"
    ldd "$b" | awk '/=> \// { print $3 }' | while read -r lib; do
        case $(basename "$lib") in
        libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libnvidia*|libcublas*|libcudart*|libcudnn*) ;;
        *) cp -n "$lib" "$dir/lib/" 2>/dev/null || true ;;
        esac
    done
done
# the binaries next to each other (they share most of their device code, which xz then stores
# once), the libraries after them
(cd "$dir" && tar cf - $(ls -d gpu-* frugal-cuda loadgen 2>/dev/null) lib) | xz -9 -T0 >"$out"
rm -rf "$dir"
ls -la "$out"
