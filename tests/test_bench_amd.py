#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql-bench --quick --agent amd on the KFD emulation (the meson run's
environment names it): it runs, prints every row, marks the figures as
no result and judges no goal; the same with --json. Not run on hardware.

usage: test_bench_amd.py AQL_BENCH
"""

import json
import subprocess
import sys

MEASURED = ['amd_rtt_spin', 'amd_rtt_block', 'amd_barrier_and_rtt', 'amd_dispatch_throughput',
            'amd_submit_raw_ns', 'amd_submit_typed_ns', 'amd_typed_overhead_ns',
            'amd_graph_replay_host_ns_per_launch', 'amd_graph_individual_host_ns_per_launch',
            'amd_graph_chain_ns', 'amd_graph_chain_individual_ns',
            'amd_copy_h2d', 'amd_copy_d2h', 'amd_copy_d2d']
NOT_MEASURED = ['amd_rtt_hip']
GOALS = ['amd_rtt_goal_ns', 'amd_rtt_vs_hip_goal', 'amd_graph_host_goal', 'amd_graph_chain_goal']


def run(*args):
    p = subprocess.run([sys.argv[1], '--quick', '--agent', 'amd'] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit('aql-bench exited %d\n%s%s' % (p.returncode, p.stdout, p.stderr))
    return p.stdout, p.stderr


def check(ok, what, out):
    if not ok:
        sys.exit('%s\n--- output:\n%s' % (what, out))


def main():
    out, _ = run()
    check('EMULATION:' in out and 'no figure below is a result' in out, 'no emulation line', out)
    check('round trip <= 3 us' in out and '2x HIP' in out, 'no goals line', out)
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith('  amd_')}
    for m in MEASURED:
        check(m in rows, 'no row %s' % m, out)
    for m in NOT_MEASURED:
        check('not measured:' in rows.get(m, ''), '%s not reported as not measured' % m, out)
    check('MISSED' not in out and ' ok' not in out.split('goals (reported')[1],
          'a goal judged on the emulation', out)
    check('not judged (emulation)' in out, 'the spin goal not shown as not judged', out)

    out, err = run('--json')
    check('no figure below is a result' in err, 'no emulation line on stderr', err)
    lines = {}
    for line in out.splitlines():
        o = json.loads(line)
        lines[o['metric']] = o
    for m in MEASURED:
        check(m in lines and 'skipped' not in lines[m], 'no JSON figure for %s' % m, out)
    for m in NOT_MEASURED:
        check(lines.get(m, {}).get('skipped') is True, '%s not skipped in JSON' % m, out)
    for g in GOALS:
        check(g in lines, 'no JSON goal %s' % g, out)
        check(lines[g].get('met', None) is None, 'goal %s judged' % g, out)
    print('aql-bench --agent amd ran on the emulation; no figure is a result')


if __name__ == '__main__':
    main()
