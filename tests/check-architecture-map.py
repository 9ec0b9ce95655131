#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that ARCHITECTURE.md's map of daemon/ names exactly what is there.

The map is the first ```text block after the heading "## The map of
daemon/": one name per line, the first word of the line, indented two
spaces per level under "daemon/". A folder ends with "/"; "name.{c,h}"
stands for name.c and name.h. Every folder and file under daemon/ must be
in the map, and everything the map names must exist: a folder moved, added
or renamed without its line fails this test, and so does a stale line.

Usage: check-architecture-map.py SOURCE_ROOT
"""
import os
import re
import sys

HEADING = "## The map of daemon/"


def map_block(text):
    """The lines of the map's code block."""
    start = text.find("\n" + HEADING + "\n")
    if start < 0:
        raise ValueError(f"no heading {HEADING!r}")
    fence = text.find("\n```text\n", start)
    if fence < 0:
        raise ValueError("no ```text block after the map's heading")
    body = text[fence + len("\n```text\n"):]
    end = body.find("\n```")
    if end < 0:
        raise ValueError("the map's code block does not end")
    return body[:end].split("\n")


def expand(name):
    """name.{c,h} -> [name.c, name.h]; anything else -> [name]."""
    m = re.fullmatch(r"(.*)\{([^{}]+)\}", name)
    if not m:
        return [name]
    return [m.group(1) + alt for alt in m.group(2).split(",")]


def map_paths(lines):
    """Paths relative to daemon/ ("core/", "core/main.c"), from the map."""
    paths, errors, stack = set(), [], []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0]
        if n == 1 or not stack:
            if name != "daemon/" or indent != 0:
                errors.append(f"map line {n}: the map starts with 'daemon/' unindented")
                return paths, errors
            stack = [""]
            continue
        if indent % 2 or indent == 0 or indent // 2 > len(stack):
            errors.append(f"map line {n}: indentation {indent} does not fit: {line!r}")
            continue
        del stack[indent // 2:]
        for item in expand(name):
            path = stack[-1] + item
            if path in paths:
                errors.append(f"map line {n}: {path} is named twice")
            paths.add(path)
        if name.endswith("/"):
            stack.append(stack[-1] + name)
    return paths, errors


def tree_paths(daemon_dir):
    """Every folder ("x/") and file under daemon_dir, relative to it."""
    paths = set()
    for root, dirs, files in os.walk(daemon_dir):
        rel = os.path.relpath(root, daemon_dir)
        prefix = "" if rel == "." else rel + "/"
        for d in dirs:
            paths.add(prefix + d + "/")
        for f in files:
            paths.add(prefix + f)
    return paths


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    root = sys.argv[1]
    with open(os.path.join(root, "ARCHITECTURE.md"), encoding="utf-8") as f:
        text = f.read()
    try:
        named, errors = map_paths(map_block(text))
    except ValueError as e:
        print(f"ARCHITECTURE.md: {e}", file=sys.stderr)
        return 1
    there = tree_paths(os.path.join(root, "daemon"))
    for path in sorted(there - named):
        errors.append(f"daemon/{path} is not in ARCHITECTURE.md's map")
    for path in sorted(named - there):
        errors.append(f"ARCHITECTURE.md's map names daemon/{path}, which does not exist")
    for e in errors:
        print(e, file=sys.stderr)
    if not errors:
        print(f"ARCHITECTURE.md's map names the {len(there)} folders and files of daemon/")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
