#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql-bench --quick --agent cuda --json on the emulated driver (the meson
run's environment names it): the resident throughput's two goals, against
the raw launches/s and against the CUDA graph's rate, 1e9 over its ns per
launch. The figures are the emulation's, never a result.

usage: test_bench_cuda.py AQL_BENCH
"""

import json
import subprocess
import sys


def main():
    p = subprocess.run([sys.argv[1], '--quick', '--agent', 'cuda', '--json'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit('aql-bench exited %d\n%s%s' % (p.returncode, p.stdout, p.stderr))
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith('{'):
            row = json.loads(line)
            rows[row['metric']] = row
    for name in ['cuda_resident_throughput', 'cuda_launch_throughput_raw',
                 'cuda_rtt_graph_per_launch', 'cuda_resident_throughput_goal',
                 'cuda_resident_throughput_graph_goal']:
        if name not in rows or rows[name].get('skipped'):
            sys.exit('no %s\n%s' % (name, p.stdout))
    rate = rows['cuda_resident_throughput']['value']
    checks = [('cuda_resident_throughput_goal', 'cuda_launch_throughput_raw', 2.0,
               rate / rows['cuda_launch_throughput_raw']['value']),
              ('cuda_resident_throughput_graph_goal', 'cuda_rtt_graph_per_launch', 1.0,
               rate / (1e9 / rows['cuda_rtt_graph_per_launch']['p50']))]
    for name, den, goal, want in checks:
        g = rows[name]
        if (g['num'], g['den'], g['cmp'], g['goal']) != ('cuda_resident_throughput', den, '>=',
                                                        goal):
            sys.exit('%s compares the wrong rows: %s' % (name, g))
        # JSON keeps 4 significant digits of a rate and 4 decimals of a ratio.
        if abs(g['value'] - want) > 1e-4 + 2e-3 * want:
            sys.exit('%s is %g, not %g' % (name, g['value'], want))
        if g['met'] not in (True, False, None) or (g['met'] is not None and
                                                   g['met'] != (g['value'] >= goal)):
            sys.exit('%s: verdict %s for %g >= %g' % (name, g['met'], g['value'], goal))
    print('resident throughput goals: %.4f of raw, %.4f of the graph (emulation, no result)'
          % (rows['cuda_resident_throughput_goal']['value'],
             rows['cuda_resident_throughput_graph_goal']['value']))


if __name__ == '__main__':
    main()
