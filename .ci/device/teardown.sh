#!/bin/bash
# The probe-teardown check of docs/cuda.md (2026-11-26): the selector
# tests, whose engines come and go while device probes run, in a loop.
# Binaries from .dev/bins.tar.xz (pack.sh); a crash prints its backtrace
# (segv.so) into $OUT.
set -u
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
[ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -c "import tarfile; tarfile.open('.dev/bins.tar.xz').extractall('.dev/bin')"
chmod +x .dev/bin/*
B=.dev/bin
P=$PWD/$B/segv.so
export COMPUTEQ_REQUIRE=cuda,wgpu,ptxas
timeout 60 $B/bench --devices --sizes 1000 > /dev/null 2>&1; echo "warm-up bench rc=$?"
for i in 1 2 3 4 5; do S=$SECONDS; LD_PRELOAD=$P timeout 30 $B/selector --exact history_persists_across_engines_and_resets --test-threads=1 > "$OUT/one_$i.txt" 2>&1; echo "one $i rc=$? $((SECONDS-S)) s"; done
for i in 1 2 3; do S=$SECONDS; LD_PRELOAD=$P timeout 40 $B/selector --test-threads=1 > "$OUT/all_$i.txt" 2>&1; echo "all, one thread, $i rc=$? $((SECONDS-S)) s"; done
S=$SECONDS; timeout 60 $B/selector > "$OUT/all_threads.txt" 2>&1; echo "all, default threads, rc=$? $((SECONDS-S)) s"
for d in wgpu cuda; do S=$SECONDS; COMPUTEQ_REQUIRE= COMPUTEQ_DISABLE=$d LD_PRELOAD=$P timeout 40 $B/selector --test-threads=1 > "$OUT/disabled_$d.txt" 2>&1; echo "COMPUTEQ_DISABLE=$d rc=$? $((SECONDS-S)) s"; done
grep -h -A30 "=== signal" "$OUT"/*.txt | grep -v "^[0-9a-f]*-[0-9a-f]* " | head -60
