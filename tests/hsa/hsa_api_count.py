#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How many of the functions libhsa-runtime64.so.1 exports (hsa/hsa.map)
the HSA tests use: each test source is preprocessed (so names a macro
builds, such as hsa_queue_##op##_relaxed, count), and an exported name
counts where it appears in the test's own lines, called or taken as a
pointer to be called (arrays of index functions); names in string
literals, struct members (extension table entries) and addresses that
are only compared do not count.
Fails unless docs/hsa.md states the same count ("call N of the M
functions"). --list prints the names no test uses."""
import argparse
import re
import subprocess
import sys


def exported(map_path):
    text = re.sub(r'/\*.*?\*/', '', open(map_path).read(), flags=re.S)
    return set(re.findall(r'^\s*(hsa_\w+);', text, flags=re.M))


def used(cc, source, includes):
    out = subprocess.run(cc + ['-E', '-D_GNU_SOURCE'] + [f'-I{i}' for i in includes] + [source],
                         capture_output=True, text=True, check=True).stdout
    names, own = set(), False
    for line in out.splitlines():
        m = re.match(r'# \d+ "([^"]+)"', line)
        if m:
            own = m.group(1) == source
            continue
        if own:
            # Not calls: names inside strings (messages, dlsym), struct
            # members (a table's entries), addresses only compared.
            code = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
            code = re.sub(r'(\.|->)\s*hsa_\w+', '', code)
            code = re.sub(r'[=!]=\s*hsa_\w+\b(?!\s*\()', '', code)
            names.update(re.findall(r'\b(hsa_\w+)\b', code))
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cc', required=True, help='the C compiler, one argument per word')
    ap.add_argument('--map', required=True)
    ap.add_argument('--doc', required=True)
    ap.add_argument('--list', action='store_true')
    ap.add_argument('-I', dest='includes', action='append', default=[])
    ap.add_argument('sources', nargs='+')
    args = ap.parse_args()
    exports = exported(args.map)
    seen = set()
    for src in args.sources:
        seen |= used(args.cc.split(), src, args.includes) & exports
    print(f'the HSA tests call {len(seen)} of the {len(exports)} exported functions')
    if args.list:
        print('\n'.join(sorted(exports - seen)))
    doc = re.search(r'call\s+(\d+)\s+of\s+the\s+(\d+)\s+functions', open(args.doc).read())
    if not doc or (int(doc.group(1)), int(doc.group(2))) != (len(seen), len(exports)):
        print(f'FAIL: {args.doc} says "{doc.group(0) if doc else "nothing"}"; '
              f'it should say "call {len(seen)} of the {len(exports)} functions"')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
