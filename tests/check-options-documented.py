#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check that rdmacm-mux(8) documents exactly the options rdmacm-mux has.

Every long option `rdmacm-mux --help` lists has an entry in
man/rdmacm-mux.8.scd (a line starting with "*--name*" or "*-x*, *--name*"),
and every entry is an option --help lists. A numeric option's help ends
with its default, taken from the daemon's configuration; its entry must
say the same: "Default: N". So an option added, renamed or given another
default without its manual page fails here.

Usage: check-options-documented.py RDMACM_MUX_BINARY MAN_PAGE
"""
import re
import subprocess
import sys


def help_options(binary):
    """{long name: default or None} from --help."""
    text = subprocess.run([binary, "--help"], check=True, capture_output=True,
                          text=True).stdout
    options = {}
    for line in text.splitlines():
        m = re.match(r"\s+(?:-\w, )?--([a-z-]+)(?:=\S+)?\s+(.*)", line)
        if not m or m.group(1) == "help":
            continue
        d = re.search(r"\((?:\w+, )?default (\d+)[;:)]", m.group(2))
        options[m.group(1)] = d.group(1) if d else None
    return options


def man_entries(path):
    """{long name: the entry's text} from the OPTIONS section ("*--a*=_X_,
    *--b*=_Y_" is one entry for both)."""
    entries, names, body, started = {}, [], [], False

    def close():
        for n in names:
            entries[n] = " ".join(body)

    for line in open(path, encoding="utf-8"):
        if line.startswith("# ") and started:
            break
        if line.startswith("*-"):
            started = True
            close()
            names = [n for n in re.findall(r"\*--([a-z-]+)\*", line) if n != "help"]
            body = []
        elif names:
            body.append(line.strip())
    close()
    return entries


def main():
    binary, man = sys.argv[1], sys.argv[2]
    options, entries = help_options(binary), man_entries(man)
    errors = []
    for name, default in sorted(options.items()):
        if name not in entries:
            errors.append(f"--{name} is not in {man}")
        elif default is not None and not re.search(rf"Default:\s+{default}\b",
                                                   entries[name]):
            errors.append(f"--{name}: the manual does not say 'Default: {default}'")
    for name in sorted(entries):
        if name not in options:
            errors.append(f"{man} documents --{name}, which rdmacm-mux does not have")
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"rdmacm-mux(8) documents the {len(options)} options of rdmacm-mux --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
