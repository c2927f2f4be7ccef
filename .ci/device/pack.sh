#!/bin/bash
# Builds the test binaries (features wgpu,cuda: the device suites need no
# more, and all features add DataFusion's and Ballista's build) and the CUDA
# benches here, strips
# them and packs them into .dev/bins.tar.xz for the device machine, which
# has no Rust toolchain. Run from the repository root; then, with the
# device tool, `bash .ci/device/run.sh` carrying [".dev", ".gl"] (.gl: the
# Vulkan/GL loader packages, `apt-get download libvulkan1 libegl1 ...`).
set -euo pipefail
rm -rf /tmp/computeq-bins
cargo test --features "${FEATURES:-wgpu,cuda}" --tests --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil, os
os.makedirs("/tmp/computeq-bins", exist_ok=True)
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        if name in ("computeq", "cuda_device", "differential", "selector", "wgpu_backend", "ptx", "semantics", "stress", "aggregates", "early_exit", "sort", "groups", "device_relational"):
            shutil.copy(m["executable"], "/tmp/computeq-bins/" + name)
'
# NO_BENCH=1: the test binaries only (a lease that runs no bench).
if [ -z "${NO_BENCH:-}" ]; then
  cargo build --release --features cuda --example bench --example bench_device_relational
  cp target/release/examples/bench target/release/examples/bench_device_relational /tmp/computeq-bins/
fi
strip /tmp/computeq-bins/*
gcc -shared -fPIC -O1 -o /tmp/computeq-bins/segv.so .ci/device/segv.c -ldl
mkdir -p .dev
python3 -c '
import tarfile, os
with tarfile.open(".dev/bins.tar.xz", "w:xz", preset=1) as t:
    for f in sorted(os.listdir("/tmp/computeq-bins")):
        t.add("/tmp/computeq-bins/" + f, arcname=f)
'
ls -la .dev/bins.tar.xz
