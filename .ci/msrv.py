#!/usr/bin/env python3
"""Checks that Cargo.toml's rust-version is at least the newest rust-version
any dependency in Cargo.lock declares (with every feature): the declared
minimum must be one the locked dependencies can build with. No other
toolchain can be installed here, so this is the check CI can afford."""
import json
import subprocess
import sys

meta = json.loads(subprocess.check_output(
    ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"]))
ours = next(p for p in meta["packages"] if p["id"] in meta["workspace_members"])
def version(v):
    return tuple(int(x) for x in v.split("."))[:2] if v else (0, 0)
declared = version(ours.get("rust_version"))
need = max((version(p.get("rust_version")), p["name"]) for p in meta["packages"])
print(f"rust-version {'.'.join(map(str, declared))}; the locked dependencies need "
      f"{'.'.join(map(str, need[0]))} ({need[1]})")
if declared < need[0]:
    sys.exit("Cargo.toml's rust-version is older than a dependency allows")
