#!/bin/bash
# One device call: the CUDA bench rows, then the device test suites, each
# bounded; output under $OUT. Binaries from .dev/bins.tar.xz (pack.sh).
# SIZES, BENCH_S, REL_SIZES (empty: no relational bench), REL_ROUNDS,
# REL_S, TESTS, DIFF_FILTER, TEST_S, THREADS and REQ override the defaults
# (SIZES empty: no bench; THREADS: test threads, 1 by default).
set -u
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
[ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json ] && export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
python3 -c "import tarfile; tarfile.open('.dev/bins.tar.xz').extractall('.dev/bin')"
chmod +x .dev/bin/*
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
export PATH=$PATH:/usr/local/cuda/bin
B=.dev/bin
S=$SECONDS
echo "== bench (--devices)"; [ -x $B/bench ] && [ -n "${SIZES-x}" ] && timeout "${BENCH_S:-170}" $B/bench --devices --sizes "${SIZES:-1000,100000,10000000,100000000}" 2>&1 | tee "$OUT/bench.txt"
echo "== bench took $((SECONDS-S)) s"
S=$SECONDS
echo "== bench_device_relational"; [ -x $B/bench_device_relational ] && [ -n "${REL_SIZES-x}" ] && timeout "${REL_S:-150}" $B/bench_device_relational ${REL_DEVICES:+--devices $REL_DEVICES} --sizes "${REL_SIZES:-1000000,67108864}" --rounds "${REL_ROUNDS:-5}" 2>&1 | tee "$OUT/relational.txt"
echo "== bench_device_relational took $((SECONDS-S)) s"
export COMPUTEQ_REQUIRE=${REQ:-cuda,ptxas,wgpu}
for t in ${TESTS:-cuda_device computeq selector ptx wgpu_backend semantics stress aggregates early_exit sort groups device_relational differential}; do
  S=$SECONDS
  f=""; [ "$t" = differential ] && f="${DIFF_FILTER:-cuda}"
  echo "== $t $f" | tee -a "$OUT/tests.txt"
  # One test thread: NVIDIA's Vulkan driver stalls with many devices
  # opened at once (docs/cuda.md).
  th=--test-threads=${THREADS:-1}; [ "$t" = ptx ] && th=
  LD_PRELOAD=$PWD/$B/segv.so timeout "${TEST_S:-100}" $B/$t $th $f >> "$OUT/tests.txt" 2>&1; rc=$?
  echo "== $t rc=$rc $((SECONDS-S)) s" | tee -a "$OUT/tests.txt"
done
grep -E "^== |^test result|FAILED|panicked|=== signal" "$OUT/tests.txt" | head -60
