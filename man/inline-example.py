#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Put a C source file into a scdoc page, as a literal block in place of
the page's line "@EXAMPLE@", so that the page shows the code the build
compiles.

usage: inline-example.py PAGE.scd EXAMPLE.c OUT.scd

The file's leading comments (licence and description: the page says that
in words) are left out. Backslashes are doubled: scdoc hands a literal
block to roff as it is, and roff would take "\\n" for an escape."""
import sys

MARKER = "@EXAMPLE@"


def main():
    page_path, example_path, out_path = sys.argv[1:]
    with open(page_path, encoding="utf-8") as f:
        page = f.read().split("\n")
    with open(example_path, encoding="utf-8") as f:
        code = f.read()

    if page.count(MARKER) != 1:
        sys.exit(f"{page_path}: expected one line {MARKER}")
    while code.lstrip().startswith("/*"):
        code = code.lstrip()
        code = code[code.index("*/") + 2:]
    lines = code.strip("\n").split("\n")
    for n, line in enumerate(lines, 1):
        if line.startswith((".", "'")):
            sys.exit(f"{example_path}: line {n} would be a roff request")
        if "```" in line:
            sys.exit(f"{example_path}: line {n} would end the literal block")
    block = ["```"] + [line.replace("\\", "\\\\") for line in lines] + ["```"]

    i = page.index(MARKER)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(page[:i] + block + page[i + 1:]))


if __name__ == "__main__":
    main()
