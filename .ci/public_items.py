#!/usr/bin/env python3
"""Counts the crate's public items from its rustdoc output, by module.

    cargo doc --no-deps --all-features && python3 .ci/public_items.py

An item is a page of an item (struct, enum, fn, trait, constant, type,
macro, static, union) that is not a redirect: each public path of an
item once, re-exports at the place they are exported.
"""
import collections, pathlib, re, sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/doc/computeq")
kinds = re.compile(r"^(struct|enum|fn|trait|constant|type|macro|static|union)\..+\.html$")
by_module = collections.Counter()
for page in root.rglob("*.html"):
    if not kinds.match(page.name):
        continue
    if 'http-equiv="refresh"' in page.read_text(errors="replace")[:2000]:
        continue
    module = page.parent.relative_to(root).as_posix()
    by_module[module if module != "." else "(root)"] += 1
plumbing = sum(n for m, n in by_module.items() if m.startswith("plumbing"))
total = sum(by_module.values())
for m, n in sorted(by_module.items()):
    print(f"{n:5}  {m}")
print(f"{total:5}  public items: {total - plumbing} in the API, {plumbing} in plumbing")
