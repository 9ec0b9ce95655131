#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write PROTOCOL.md's err_code table as a C header.

Usage: gen-err-codes.py PROTOCOL.md OUTPUT.h

The table under "### Constants" whose header is "| `err_code` | value |
errno |" says which errnos a base-protocol client gets as a positive code:
each row with a number in its second column lists them in backquotes in
its third. The header holds them as data, so that a test states the
protocol's answers from the document, not from the daemon's code.
"""
import re
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    rows = []
    in_table = False
    with open(src, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| `err_code` | value | errno |"):
                in_table = True
                continue
            if not in_table:
                continue
            if not line.startswith("|"):
                break
            if len(cells) < 3 or not re.fullmatch(r"[0-9]+", cells[1]):
                continue
            value = int(cells[1])
            if value == 0:
                continue
            errnos = re.findall(r"`(E[A-Z0-9]+)`", cells[2].split(":")[0])
            if not errnos:
                sys.exit(f"{src}: err_code {cells[0]} ({value}) names no errno")
            rows.extend((name, value, cells[0]) for name in errnos)
    if not rows:
        sys.exit(f"{src}: no err_code table found")
    with open(out, "w", encoding="utf-8") as f:
        f.write("/* Generated from proto/PROTOCOL.md by proto/gen-err-codes.py. */\n")
        f.write("#ifndef RDMACM_MUX_PROTOCOL_ERR_CODES_H\n")
        f.write("#define RDMACM_MUX_PROTOCOL_ERR_CODES_H\n\n")
        f.write("#include <errno.h>\n#include <stdint.h>\n\n")
        f.write("/* The errnos a base-protocol client gets as a positive err_code. */\n")
        f.write("static const struct {\n\tint errnum;\n\tint32_t code;\n} "
                "protocol_err_codes[] = {\n")
        for name, value, label in rows:
            f.write(f"\t{{ {name}, {value} }}, /* {label} */\n")
        f.write("};\n\n#endif\n")


if __name__ == "__main__":
    main()
