#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""librdmacm-mux(3) documents every call and every flag, event type and
state of the library: each symbol of the version script must be in the
page's SYNOPSIS and described below it (as *name*()), and each
RDMACM_MUX_OPEN_*, RDMACM_MUX_OPEN_ATTR_*, RDMACM_MUX_EVENT_* and
RDMACM_MUX_STATE_* name of the header must be in the page (as *NAME*).

usage: check-man-coverage.py MAP.sym HEADER.h PAGE.scd"""
import re
import sys


def main():
    map_path, header_path, page_path = sys.argv[1:]
    with open(map_path, encoding="utf-8") as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    symbols = sorted(set(re.findall(r"^\s*(rdmacm_mux_\w+);", text, flags=re.M)))
    with open(header_path, encoding="utf-8") as f:
        header = f.read()
    names = sorted(set(re.findall(
        r"\b(RDMACM_MUX_(?:OPEN|OPEN_ATTR|EVENT|STATE)_[A-Z_]+)\b\s*(?:\(|=|[0-9])",
        header)))
    with open(page_path, encoding="utf-8") as f:
        page = f.read()
    synopsis = page[page.index("# SYNOPSIS"):page.index("# DESCRIPTION")]
    body = page[page.index("# DESCRIPTION"):]

    missing = []
    for s in symbols:
        if s + "(" not in synopsis:
            missing.append(f"{s}() is not in the SYNOPSIS")
        if f"*{s}*(" not in body:
            missing.append(f"{s}() is not described (no *{s}*())")
    for n in names:
        if f"*{n}*" not in body:
            missing.append(f"{n} is not described (no *{n}*)")
    if not symbols or not names:
        sys.exit("found no symbols or no names: the parsing is broken")
    if missing:
        print("\n".join(missing), file=sys.stderr)
        sys.exit(f"{page_path} lacks {len(missing)} things the library has")
    print(f"{len(symbols)} calls and {len(names)} flags, events and states documented")


if __name__ == "__main__":
    main()
