#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql-bench --quick --contention 1: the default mode's rows idle, then
the same rows beside one busy thread (each marked "contention":1), then
contention_ratio_<row> for every row measured both times, equal to busy
over idle and judged against the goal (throughput >= 0.5, latency p50
<= 2x) except for the machine's baselines and for rows whose cross-CPU
round trips (xcpu_rtt_ns, taken around the row in both runs; none on one
CPU) differ by more than 2x: those get met null and say why. A busy row
is measured, not the idle row's figure again. The table form has both
runs and the ratios. Wrong uses are refused. Figures are not judged here.

usage: test_bench_contention.py AQL_BENCH
"""

import json
import os
import subprocess
import sys


def run(*args, want=0):
    p = subprocess.run([sys.argv[1], '--quick'] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    if p.returncode != want:
        sys.exit('aql-bench %s exited %d, not %d\n%s%s' %
                 (' '.join(args), p.returncode, want, p.stdout, p.stderr))
    return p.stdout, p.stderr


def headline(row):
    return row['value'] if 'value' in row else row['p50']


def main():
    out, _ = run('--contention', '1', '--json')
    idle, busy, ratios = {}, {}, {}
    for line in out.splitlines():
        row = json.loads(line)
        metric = row['metric']
        if metric.startswith('contention_ratio_'):
            ratios[metric[len('contention_ratio_'):]] = row
        elif 'contention' in row:
            if row['contention'] != 1:
                sys.exit('busy row with contention %r: %s' % (row['contention'], line))
            busy[metric] = row
        elif metric not in idle:
            idle[metric] = row
    # latency and throughput rows; durations (rows with 'reps': whole
    # runs of a kernel or loop) are reported in both runs, not compared
    measured = [m for m, r in busy.items() if not r.get('skipped') and
                ('p50' in r) and 'reps' not in r]
    for m in ('dispatch_throughput', 'dispatch_throughput_barrier', 'dispatch_throughput_mp',
              'dispatch_rtt_spin', 'dispatch_rtt_block'):
        if m not in measured or m not in idle:
            sys.exit('%s: not measured both idle and busy' % m)
    for m in measured:
        # a figure measured again has its own distribution; the same one
        # to the last sample is the idle run's, reused
        if 'cdf' in busy[m] and (busy[m]['cdf'], busy[m]['mean']) == (idle[m]['cdf'],
                                                                       idle[m]['mean']):
            sys.exit('%s: the busy run reports the idle run\'s figure' % m)
        if m not in ratios:
            sys.exit('%s: no contention_ratio_%s' % (m, m))
        r, want = ratios[m], headline(busy[m]) / headline(idle[m])
        if abs(r['value'] - want) > 2e-3 * want + 1e-4:
            sys.exit('%s: ratio %r, busy/idle is %r' % (m, r['value'], want))
        judged = not m.startswith('baseline_')
        if judged != ('goal' in r):
            sys.exit('%s: judged %s, line %r' % (m, judged, r))
        xcpu = r.get('xcpu_rtt_ns')
        several = len(os.sched_getaffinity(0)) > 1
        if not xcpu or len(xcpu) != 4 or several != (min(xcpu) > 0):
            sys.exit('%s: cross-CPU round trips %r' % (m, xcpu))
        one_machine = max(xcpu) == 0 or (min(xcpu) > 0 and max(xcpu) <= 2 * min(xcpu))
        if judged:
            rate = busy[m]['unit'] != 'ns'
            if (r['goal'], r['cmp']) != ((0.5, '>=') if rate else (2, '<=')):
                sys.exit('%s: goal %r %r' % (m, r['cmp'], r['goal']))
            want = (r['value'] >= 0.5 if rate else r['value'] <= 2) if one_machine else None
            if r['met'] != want or (want is None) != ('why' in r):
                sys.exit('%s: met %r for %r on %r' % (m, r['met'], r['value'], xcpu))
    out, _ = run('--contention', '1')
    for part in ('== idle ==', '== beside 1 busy thread(s) ==',
                 'contention ratio (busy / idle)'):
        if part not in out:
            sys.exit('table: no %r\n%s' % (part, out))
    run('--contention', '0', want=2)
    run('--contention', '1', '--channel', want=2)
    print('ok: %d rows measured idle and beside a busy thread, each with its ratio'
          % len(measured))


main()
