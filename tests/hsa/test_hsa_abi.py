#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql's libhsa-runtime64.so.1 against Debian's ROCr: the same soname;
every hsa_* function ROCr exports is exported, as a function, under the
same version node (ROCR_1); nothing else is exported. ROCr's library is
the one a program linked against it (--program, tests/hsa/rocr_linked.c)
resolves on the default path; that program then runs with aql's library
first on the path and must pass.

usage: test_hsa_abi.py --lib AQL_LIB --program EXE
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

# objdump -T: address, flags, section, size, version, name.
DYNSYM = re.compile(r'^[0-9a-f]+ (.{7}) (\S+)\s+[0-9a-f]+\s+(?:\((\S+)\)|(\S+))?\s+(\S+)$')


def dynamic_symbols(objdump, path):
    """{name: (kind, section, version)} of the defined dynamic symbols."""
    out = subprocess.run([objdump, '-T', path], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    syms = {}
    for line in out.splitlines():
        m = DYNSYM.match(line)
        if not m or m.group(2) == '*UND*':
            continue
        flags, section, version, name = m.group(1), m.group(2), m.group(3) or m.group(4), m.group(5)
        kind = 'func' if 'F' in flags else 'object' if 'O' in flags else 'other'
        syms[name] = (kind, section, version)
    return syms


def soname(objdump, path):
    out = subprocess.run([objdump, '-p', path], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    m = re.search(r'^\s+SONAME\s+(\S+)', out, re.M)
    return m.group(1) if m else None


def undefined_versions(objdump, path):
    """{name: version} of the hsa_* functions path takes from elsewhere."""
    out = subprocess.run([objdump, '-T', path], stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    refs = {}
    for line in out.splitlines():
        parts = line.split()
        if '*UND*' in parts and parts[-1].startswith('hsa_'):
            refs[parts[-1]] = parts[-2].strip('()')
    return refs


def rocr_library(program):
    """The libhsa-runtime64.so.1 program resolves without LD_LIBRARY_PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'LD_PRELOAD')}
    out = subprocess.run(['ldd', program], env=env, stdout=subprocess.PIPE, text=True,
                         check=True).stdout
    m = re.search(r'libhsa-runtime64\.so\.1 => (/\S+)', out)
    return m.group(1) if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--lib', required=True)
    ap.add_argument('--program', required=True)
    args = ap.parse_args()
    objdump = shutil.which('objdump')
    if not objdump:
        print('SKIP: needs objdump (binutils)')
        return 77
    failed = 0

    def check(cond, what):
        nonlocal failed
        if not cond:
            print('FAIL ' + what)
            failed += 1

    rocr_path = rocr_library(args.program)
    if not rocr_path or os.path.realpath(rocr_path) == os.path.realpath(args.lib):
        print('FAIL %s does not resolve ROCr\'s library (got %s)' % (args.program, rocr_path))
        return 1
    print('ROCr: %s' % rocr_path)
    ours, rocr = dynamic_symbols(objdump, args.lib), dynamic_symbols(objdump, rocr_path)
    want = {n: v for n, v in rocr.items() if n.startswith('hsa_') and v[0] == 'func'}
    check(len(want) >= 224, 'ROCr exports %d hsa_* functions, expected 224' % len(want))
    check(soname(objdump, args.lib) == soname(objdump, rocr_path) == 'libhsa-runtime64.so.1',
          'sonames: %s, ROCr %s' % (soname(objdump, args.lib), soname(objdump, rocr_path)))
    for name, (_, _, version) in sorted(want.items()):
        got = ours.get(name)
        check(got is not None, '%s@%s is not exported' % (name, version))
        if got:
            check(got[0] == 'func' and got[1] == '.text' and got[2] == version,
                  '%s is %s in %s under %s; ROCr: a function under %s' %
                  (name, got[0], got[1], got[2], version))
    for name, (kind, section, version) in sorted(ours.items()):
        # The version node's own definition (ROCR_1 in *ABS*) is no symbol.
        if section == '*ABS*' and name == version:
            continue
        check(name in want, '%s (%s, %s) is exported but is not one of ROCr\'s' %
              (name, kind, version))
    print('%d of ROCr\'s hsa_* functions checked, %d symbols exported' % (len(want), len(ours)))

    refs = undefined_versions(objdump, args.program)
    check(len(refs) > 0 and all(v == 'ROCR_1' for v in refs.values()),
          '%s asks ROCr\'s versions: %s' % (args.program, refs))
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(args.lib)))
    p = subprocess.run([args.program, args.lib], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    sys.stdout.write(p.stdout)
    check(p.returncode == 0, '%s exits %d on aql\'s library' % (args.program, p.returncode))

    print('FAILED' if failed else 'passed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
