#!/usr/bin/env python3
"""Lines of LLVM IR per function of the computeq library, grouped by name
with generic arguments erased (what `cargo llvm-lines` prints), to see
where the build's code generation goes.

    cargo rustc --lib -- --emit=llvm-ir -C codegen-units=1
    python3 .ci/ir_lines.py target/debug/deps/computeq-*.ll [TOP]

The unoptimized IR counts every monomorphized and inlined copy once per
function that holds it; a function of a million lines is optimized by one
LLVM thread, alone.
"""
import collections
import re
import subprocess
import sys


def functions(path):
    """(mangled name, lines) of every function defined in the file."""
    cur, n = None, 0
    with open(path, errors="replace") as fh:
        for line in fh:
            if line.startswith("define "):
                m = re.search(r'@("?)([^\s(]+)\1\(', line)
                cur, n = (m.group(2) if m else "?"), 0
            elif cur is not None:
                if line.startswith("}"):
                    yield cur, n
                    cur = None
                else:
                    n += 1


def erase_generics(name):
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<")
        elif ch == ">":
            depth -= 1
            if depth == 0:
                out.append(">")
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    fns = list(functions(path))
    demangled = subprocess.run(
        ["c++filt"], input="\n".join(n for n, _ in fns), capture_output=True, text=True, check=True
    ).stdout.split("\n")
    lines, copies = collections.Counter(), collections.Counter()
    biggest = max(fns, key=lambda f: f[1]) if fns else ("-", 0)
    for (_, n), d in zip(fns, demangled):
        k = erase_generics(d)
        lines[k] += n
        copies[k] += 1
    total = sum(lines.values())
    print(f"total: {total} lines in {len(fns)} functions; largest function: {biggest[1]} lines")
    print(f"{'lines':>9} {'share':>6} {'copies':>6}  function")
    for k, v in lines.most_common(top):
        print(f"{v:9d} {100 * v / total:5.1f}% {copies[k]:6d}  {k}")


if __name__ == "__main__":
    main()
