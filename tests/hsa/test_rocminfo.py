#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run Debian's rocminfo (built for ROCr) on aql's libhsa-runtime64.so.1:
it must exit 0 and list every agent aql-info lists, with its name, a
pool and its ISA. rocminfo runs under rocminfo_shim.so, which answers its
own amdgpu checks where there is no amdgpu module; the test first makes
sure the dynamic linker picks the build's library, not ROCr's.

usage: test_rocminfo.py --lib-dir DIR --shim SO --info AQL_INFO [--rocminfo PATH]
                        [--emu-dir DIR]

--emu-dir: tests/cuda_emu's directory, so that an emulated NVIDIA agent
is listed too; AQL_KFD_SYS in the environment (the KFD emulation) adds AMD
agents to both listings. Exit 77 (skip) where rocminfo is not installed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

TIMEOUT = 300


def sanitizer_runtimes(lib):
    """The sanitizer runtimes lib was linked with, as paths: a program built
    without them must preload them ahead of everything else."""
    out = subprocess.run(['ldd', lib], stdout=subprocess.PIPE, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = re.match(r'\s*(lib(?:asan|ubsan|tsan)\.so\S*) => (\S+)', line)
        if m:
            found.append(m.group(2))
    return found


def base_env(args):
    env = {k: v for k, v in os.environ.items() if k not in ('LD_LIBRARY_PATH', 'LD_PRELOAD')}
    dirs = [args.lib_dir] + ([args.emu_dir] if args.emu_dir else [])
    env['LD_LIBRARY_PATH'] = ':'.join(dirs)
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--lib-dir', required=True)
    ap.add_argument('--shim', required=True)
    ap.add_argument('--info', required=True)
    ap.add_argument('--rocminfo', default=shutil.which('rocminfo') or '/usr/bin/rocminfo')
    ap.add_argument('--emu-dir')
    args = ap.parse_args()
    failed = 0

    def check(cond, what):
        nonlocal failed
        print(('ok   ' if cond else 'FAIL ') + what)
        if not cond:
            failed += 1

    if not os.access(args.rocminfo, os.X_OK):
        print('SKIP: rocminfo is not installed (bootstrap.sh installs it)')
        return 77

    lib = os.path.join(args.lib_dir, 'libhsa-runtime64.so.1')
    env = base_env(args)

    # The library the dynamic linker resolves for rocminfo is the build's.
    trace = subprocess.run([args.rocminfo], env=dict(env, LD_TRACE_LOADED_OBJECTS='1'),
                           stdout=subprocess.PIPE, text=True, timeout=TIMEOUT).stdout
    m = re.search(r'libhsa-runtime64\.so\.1 => (\S+)', trace)
    check(m is not None and os.path.realpath(m.group(1)) == os.path.realpath(lib),
          'rocminfo loads %s (got %s)' % (lib, m.group(1) if m else None))

    # Under ASan or TSan, rocminfo (built without them) must preload the
    # library's sanitizer runtime. The shim goes first all the same: a
    # runtime ahead of it would intercept rocminfo's calls and make them
    # from its own code, which the shim passes through. ASan is told not
    # to insist on coming first; rocminfo's own leaks are not aql's.
    preload = [os.path.abspath(args.shim)] + sanitizer_runtimes(lib)
    env['LD_PRELOAD'] = ':'.join(preload)
    env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + ':verify_asan_link_order=0:detect_leaks=0'

    info = json.loads(subprocess.run([args.info, '--json'], env=env, stdout=subprocess.PIPE,
                                     text=True, check=True, timeout=TIMEOUT).stdout)
    agents = info['agents']
    check(len(agents) >= 1, 'aql-info lists %d agents' % len(agents))

    p = subprocess.run([args.rocminfo], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=TIMEOUT)
    out = p.stdout
    check(p.returncode == 0, 'rocminfo exits 0 (got %d; stderr: %s)' %
          (p.returncode, p.stderr.strip()[-2000:]))
    check('*** Done ***' in out, 'rocminfo runs to its end')

    # One section per agent, in aql's order (the CPU agent first).
    sections = re.split(r'\*{7}\s*\nAgent \d+\s*\n\*{7}\s*\n', out)[1:]
    check(len(sections) == len(agents),
          'rocminfo lists %d agents, aql-info %d' % (len(sections), len(agents)))
    for agent, sec in zip(agents, sections):
        name = agent['name']
        check(re.search(r'^  Name:\s+%s\s*$' % re.escape(name), sec, re.M) is not None,
              'agent %s is listed by name' % name)
        want_type = 'CPU' if agent['kind'] == 'cpu' else 'GPU'
        check(re.search(r'^  Device Type:\s+%s\s*$' % want_type, sec, re.M) is not None,
              '%s is a %s' % (name, want_type))
        cus = re.search(r'^  Compute Unit:\s+(\d+)', sec, re.M)
        check(cus is not None and int(cus.group(1)) == agent['compute_units'],
              '%s has %s compute units as aql says' % (name, agent['compute_units']))
        pools = re.findall(r'^    Pool \d+\s*\n\s+Segment:\s+GLOBAL; FLAGS: (.*?)\s*$', sec, re.M)
        check(len(pools) >= 1, '%s has pools: %s' % (name, pools))
        check(any('KERNARG' in f for f in pools), '%s has a kernarg pool' % name)
        sizes = [int(s) for s in re.findall(r'^\s+Size:\s+(\d+)\(0x[0-9a-f]+\) KB', sec, re.M)]
        check(len(sizes) == len(pools) and all(s > 0 for s in sizes),
              '%s: every pool has a size (%s KB)' % (name, sizes))
        isa = re.search(r'^    ISA 1\s*\n\s+Name:\s+(\S+)', sec, re.M)
        check(isa is not None and isa.group(1).endswith('--' + agent['isa']),
              '%s: ISA %s names %s' % (name, isa.group(1) if isa else None, agent['isa']))

    print('%s' % ('FAILED' if failed else 'passed'))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
