#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""libaql.so exports exactly the functions and variables that the public
headers (include/aql/aql.h and what it includes) declare, each under a
version node of aql.map. clang's AST names the declarations, so macros and
static inline functions are told apart as the compiler sees them.
Exits 77 where clang or nm is missing."""
import argparse
import json
import shutil
import subprocess
import sys


def public_names(clang, include):
    src = '#include <aql/aql.h>\n'
    ast = json.loads(subprocess.run(
        [clang, '-x', 'c', '-std=c17', '-D_GNU_SOURCE', '-I', include, '-Xclang',
         '-ast-dump=json', '-fsyntax-only', '-'],
        input=src, capture_output=True, text=True, check=True).stdout)
    names, where = set(), None
    for d in ast['inner']:
        loc = d.get('loc', {})
        # The AST gives a file only where it changes from the node before.
        where = loc.get('file') or loc.get('expansionLoc', {}).get('file') or where
        if d.get('kind') not in ('FunctionDecl', 'VarDecl') or not where:
            continue
        if d.get('storageClass') == 'static' or d.get('inline'):
            continue
        if '/aql/' in where and d['name'].startswith('aql_'):
            names.add(d['name'])
    return names


def exported(nm, lib):
    out = subprocess.run([nm, '-D', '--defined-only', lib], capture_output=True,
                         text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBRVWtdbr':
            name, _, version = parts[2].partition('@')
            syms[name] = version.lstrip('@')
    return syms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--lib', required=True)
    ap.add_argument('--include', required=True)
    ap.add_argument('--clang', default='clang-14')
    args = ap.parse_args()
    clang, nm = shutil.which(args.clang), shutil.which('nm')
    if not clang or not nm:
        print(f'SKIP: needs {args.clang} and nm')
        return 77
    public = public_names(clang, args.include)
    syms = exported(nm, args.lib)
    failed = 0
    for name in sorted(set(syms) - public):
        print(f'FAIL: {name} is exported but no public header declares it')
        failed += 1
    for name in sorted(public - set(syms)):
        print(f'FAIL: {name} is declared in include/aql/ but not exported')
        failed += 1
    for name, version in sorted(syms.items()):
        if name in public and not version.startswith('AQL_'):
            print(f'FAIL: {name} has no AQL_ version node (got "{version}")')
            failed += 1
    if len(public) < 100:
        print(f'FAIL: only {len(public)} public declarations found: the header walk is broken')
        failed += 1
    passed = len(public) + len(syms) - failed
    print(f'{len(syms)} symbols exported, {len(public)} declared')
    print(f'{max(passed, 0)} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
