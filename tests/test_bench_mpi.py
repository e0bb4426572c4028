#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql-bench --quick --mpi under one MPI: on 2 ranks it prints every row
once (rank 1 prints nothing), each row's figures in order and within
reason, and judges both goals; the table names the MPI library; on 1 rank
it refuses, naming the rank count it wants. No timing is asserted: the
figures of a busy machine are not results.

usage: test_bench_mpi.py LIBRARY AQL_BENCH MPIEXEC [MPIEXEC_ARG...]
LIBRARY: 'mpich' or 'openmpi', whose name the banner must show.
"""

import json
import subprocess
import sys

ROWS = ['mpi_pingpong_raw_ns', 'mpi_pingpong_queue_ns', 'mpi_pingpong_queue_over_raw_ns',
        'mpi_pingpong_raw_8B_ns', 'mpi_pingpong_queue_8B_ns', 'mpi_trigger_ns',
        'jacobi_step_host_ns', 'jacobi_step_queue_ns']
# Rows that time something, so that their minimum cannot be 0.
TIMED = [r for r in ROWS if r != 'mpi_pingpong_queue_over_raw_ns' and r != 'mpi_trigger_ns']
PEERS = {'mpi_pingpong_queue_ns': 'mpi_pingpong_raw_ns',
         'mpi_pingpong_queue_8B_ns': 'mpi_pingpong_raw_8B_ns'}
GOALS = {'mpi_pingpong_queue_goal_ns': 'mpi_pingpong_queue_over_raw_ns',
         'jacobi_step_goal': 'jacobi_step_queue_ns'}
BANNER = {'mpich': 'MPICH Version: 4', 'openmpi': 'Open MPI v4'}
# Far above any figure of a working run, even on a loaded machine.
CEILING_NS = 10 * 10**9


def run(ranks, *args, ok=True):
    cmd = MPIEXEC + ['-n', str(ranks), BENCH, '--quick', '--mpi'] + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=240)
    if ok and p.returncode != 0:
        sys.exit('%s exited %d\n%s%s' % (' '.join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def check(cond, what, out):
    if not cond:
        sys.exit('%s\n--- output:\n%s' % (what, out))


def check_json(out):
    lines = [json.loads(line) for line in out.splitlines()]
    names = [o['metric'] for o in lines]
    for m in ROWS + list(GOALS):
        check(names.count(m) == 1, '%s printed %d times, not once' % (m, names.count(m)), out)
    rows = {o['metric']: o for o in lines}
    for m in ROWS:
        o = rows[m]
        check(o.get('unit') == 'ns' and o.get('samples', 0) > 0, '%s: no ns samples' % m, out)
        check(0 <= o['min'] <= o['p50'] <= o['p99'] <= o['p999'] <= CEILING_NS,
              '%s: min, p50, p99, p99.9 out of order or out of reason' % m, out)
        check(o['mean'] >= o['min'], '%s: the mean below the minimum' % m, out)
    for m in TIMED:
        check(rows[m]['min'] > 0, '%s: a sample of 0 ns' % m, out)
    for m, peer in PEERS.items():
        check(rows[m].get('peer') == peer, '%s: peer %r, not %s' % (m, rows[m].get('peer'), peer),
              out)
    for g, num in GOALS.items():
        o = rows[g]
        check(o.get('num') == num and o.get('met') in (True, False),
              'goal %s not judged on %s' % (g, num), out)
    # The ratio goal is the two rows' medians.
    ratio = rows['jacobi_step_queue_ns']['p50'] / rows['jacobi_step_host_ns']['p50']
    check(abs(rows['jacobi_step_goal']['value'] - ratio) < 1e-3,
          'jacobi_step_goal is not queue / host', out)


def main():
    global BENCH, MPIEXEC
    lib, BENCH, MPIEXEC = sys.argv[1], sys.argv[2], sys.argv[3:]

    check_json(run(2, '--json').stdout)

    out = run(2).stdout
    check(BANNER[lib] in out.splitlines()[0], 'the banner does not name %s' % lib, out)
    check('MPI_THREAD_' in out and 'load average' in out, 'no thread level or load', out)
    for m in ROWS:
        check(sum(line.split()[:1] == [m] for line in out.splitlines()) == 1,
              'row %s not in the table once' % m, out)
    goals = out.split('goals (reported')[1]
    check(goals.count(' ok') + goals.count('MISSED') == 2, 'both goals not judged', out)

    p = run(1, ok=False)
    check(p.returncode != 0 and 'run it on 2 ranks' in p.stderr and 'has 1' in p.stderr,
          'one rank not refused', p.stdout + p.stderr)
    print('aql-bench --mpi under %s: every row once, in order; both goals judged' % lib)


if __name__ == '__main__':
    main()
