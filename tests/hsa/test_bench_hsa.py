#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql-bench --quick measures the empty dispatch through aql's
libhsa-runtime64.so.1 (tools/bench/hsa.c) beside the native rows: the
three HSA rows, their native peers on the same libaql.so
(dispatch_rtt_spin_so, dispatch_rtt_spin_block_so, dispatch_throughput_so)
and their goals are reported with measured values, not
skipped. No figure is judged (the goals are reported, never enforced).

usage: test_bench_hsa.py BENCH LIBHSA
"""

import json
import os
import subprocess
import sys

ROWS = ('dispatch_rtt_spin_so', 'dispatch_rtt_spin_hsa', 'dispatch_rtt_spin_block_so',
        'dispatch_rtt_block_hsa', 'dispatch_throughput_so', 'dispatch_throughput_hsa')
GOALS = ('ratio_dispatch_rtt_spin_hsa_vs_native', 'ratio_dispatch_rtt_block_hsa_vs_native',
         'ratio_dispatch_throughput_hsa_vs_native')


def main():
    bench, lib = sys.argv[1], sys.argv[2]
    env = dict(os.environ, AQL_BENCH_HSA_LIB=os.path.abspath(lib))
    p = subprocess.run([bench, '--quick', '--json'], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=1200)
    failed = 0
    if p.returncode != 0:
        print('FAIL aql-bench exits %d: %s' % (p.returncode, p.stderr[-2000:]))
        return 1
    got = {}
    for line in p.stdout.splitlines():
        d = json.loads(line)
        if 'metric' in d:
            got[d['metric']] = d
    for name in ROWS + GOALS:
        d = got.get(name)
        ok = d is not None and not d.get('skipped') and d.get('p50', d.get('value', 0)) > 0
        print('%s %s: %s' % ('ok  ' if ok else 'FAIL', name, d))
        failed += not ok
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
