#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Check the channel protocol model (channel.pml) with spin and assert the verdicts.

Each run: spin -a with the run's -D options, the C compiler on pan.c (in a
temporary directory), then pan. The protocol's runs must end with errors: 0
after an exhaustive search (no depth limit hit, no memory bound, checks for
assertions and invalid end states on); each seeded bug must be found, by the
check it is meant to trip (the other one is switched off); and each marked
point of the model must be reached, so that the passing runs are not passing
for want of the interesting interleavings.

Exit status: 0 when every verdict is as expected, 1 when one is not, 77 (a
meson skip) without spin or a C compiler.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

DEPTH = 10000           # pan -m: the deepest path is about 170 steps
MEMLIM_MB = 2048        # pan stops (and says so) beyond this

# (name, -D options, expectation, what it shows)
# expectation: 'pass', or the error pan must report: 'deadlock' (invalid end
# state, run with -A), 'assert' (assertion violated, run with -E) or
# 'reach' (the model's SEEN(n) assertion for -DSEE=n, run with -E: the
# protocol runs do go through point n).
RUNS = [
    ('block', [], 'pass',
     'BLOCK, 3 producers x 2 messages, 2 slots, store buffers, membarrier'),
    ('drop', ['-DDROP', '-DMLAST=1'], 'pass',
     'DROP, 3 producers x 2/2/1 messages, 2 slots, store buffers, membarrier'),
    ('block_s3', ['-DS=3', '-DMLAST=1', '-DSENDER_FENCE'], 'pass',
     'BLOCK, 3 x 2/2/1, 3 slots, senders fence (AQL_CHANNEL_FENCE, GPUs)'),
    ('tail_seen', ['-DTAIL_SEEN', '-DMLAST=1', '-DSENDER_FENCE'], 'pass',
     'BLOCK with the tail_seen cache, 3 x 2/2/1, senders fence'),
    ('lookalike', ['-DLOOKALIKE', '-DSENDER_FENCE'], 'pass',
     'payload that looks like a header, which the consumer clears; senders fence'),
    ('bug_no_clear', ['-DLOOKALIKE', '-DBUG_NO_CLEAR'], 'assert',
     'consumer leaves payload that looks like a header: garbage delivered'),
    ('bug_no_recheck', ['-DBUG_NO_RECHECK'], 'deadlock',
     'consumer sleeps without re-checking: lost wake-up'),
    ('bug_wake_early', ['-DBUG_WAKE_EARLY'], 'deadlock',
     'producer looks at sleeping before its header store: lost wake-up'),
    ('bug_no_membarrier', ['-DBUG_NO_MEMBARRIER'], 'deadlock',
     'neither membarrier nor sender fence: sleeping load passes the header'),
    ('bug_no_flush', ['-DBUG_NO_FLUSH'], 'deadlock',
     'consumer sleeps without storing tail: producers never get space'),
    ('bug_hdr_first', ['-DBUG_HDR_FIRST'], 'assert',
     'header stored before the payload: stale payload read'),
    ('bug_early_release', ['-DBUG_EARLY_RELEASE'], 'assert',
     'tail stored before the payload is read: payload overwritten'),
    ('bug_drop_no_cas', ['-DDROP', '-DMLAST=1', '-DBUG_DROP_NO_CAS'], 'assert',
     'DROP: head moved by a load and a store: two messages, one ticket'),
    ('see_wake', ['-DSEE=1'], 'reach', 'the consumer is woken by the eventfd'),
    ('see_full', ['-DSEE=2'], 'reach', 'a producer must wait for space'),
    ('see_drop', ['-DDROP', '-DMLAST=1', '-DSEE=3'], 'reach', 'a message is dropped'),
    ('see_cas_fail', ['-DDROP', '-DMLAST=1', '-DSEE=4'], 'reach', 'a CAS on head fails'),
    ('see_recheck', ['-DSEE=5'], 'reach', "the consumer's re-check finds a message"),
    ('see_done', ['-DSEE=6'], 'reach', 'the consumer gets every message'),
    ('see_wrap', ['-DSEE=7'], 'reach', 'a message wraps at the end of the ring'),
    ('see_evfd', ['-DSEE=8'], 'reach', 'a producer writes the eventfd'),
    ('see_flag_race', ['-DSEE=9'], 'reach', 'two stores of 0 to sleeping race'),
    ('see_reorder', ['-DSEE=10'], 'reach', 'a load of sleeping passes the header store'),
]


def parse(out):
    """The figures of a pan report, or None where pan did not print one."""
    r = {}
    m = re.search(r'State-vector (\d+) byte, depth reached (\d+), errors: (\d+)', out)
    if m:
        r['vector'], r['depth'], r['errors'] = (int(x) for x in m.groups())
    m = re.search(r'^\s*(\d+) states, stored', out, re.M)
    if m:
        r['states'] = int(m.group(1))
    m = re.search(r'pan: elapsed time ([0-9.e+]+) seconds', out)
    if m:
        r['time'] = float(m.group(1))
    m = re.search(r'^\s*([0-9.]+)\s+total actual memory usage', out, re.M)
    if m:
        r['mem_mb'] = float(m.group(1))
    m = re.search(r'^pan:\d+: (.*?) \(at depth \d+\)', out, re.M)
    if m:
        r['first_error'] = m.group(1)
    return r


def problems(out, r, expect):
    """What is wrong with a run's report, given what it must show."""
    bad = []
    if 'errors' not in r or 'states' not in r:
        return ['pan printed no summary']
    for text in ('out of memory', 'MEMLIM bound', 'max search depth too small'):
        if text in out:
            bad.append('pan says: ' + text)
    if expect == 'pass':
        if r['errors'] != 0:
            bad.append('errors: %d (%s)' % (r['errors'], r.get('first_error', '?')))
        if 'Search not completed' in out:
            bad.append('search not completed')
        if r['depth'] >= DEPTH - 1:
            bad.append('depth %d reached the limit -m%d' % (r['depth'], DEPTH))
        for check in ('assertion violations\t+', 'invalid end states\t+'):
            if check not in out:
                bad.append('check off: ' + check.split('\t')[0])
        if 'Full statespace search' not in out:
            bad.append('not a full state-space search')
    else:
        want = {'deadlock': r'invalid end state', 'assert': r'assertion violated',
                'reach': r'assertion violated\s+!\(\(\((\d+)==\1\)'}[expect]
        if r['errors'] == 0:
            bad.append('errors: 0, the seeded bug went unnoticed' if expect != 'reach'
                       else 'errors: 0, the point is never reached')
        elif not re.match(want, r.get('first_error', '')):
            bad.append('found "%s", not /%s/' % (r.get('first_error', '?'), want))
    return bad


def run_one(spin, cc, model, work, name, defs, expect, verbose):
    d = os.path.join(work, name)
    os.mkdir(d)
    shutil.copy(model, os.path.join(d, 'channel.pml'))

    def sh(cmd, timeout):
        p = subprocess.run(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=timeout)
        if p.returncode != 0 and cmd[0] != './pan':
            raise RuntimeError('%s failed (%d):\n%s' % (' '.join(cmd), p.returncode, p.stdout))
        return p.stdout

    sh([spin, '-a'] + defs + ['channel.pml'], 120)
    opt = '-O2' if expect == 'pass' else '-O1'
    sh(cc + [opt, '-w', '-DSAFETY', '-DCOLLAPSE', '-DMEMLIM=%d' % MEMLIM_MB,
             '-o', 'pan', 'pan.c'], 300)
    args = ['./pan', '-m%d' % DEPTH, '-n']
    if expect == 'pass':
        args.append('-w25')
    else:
        args += ['-w22', '-A' if expect == 'deadlock' else '-E']
    t0 = time.monotonic()
    out = sh(args, 600)
    wall = time.monotonic() - t0
    if verbose:
        print(out)
    r = parse(out)
    r.setdefault('time', wall)
    return out, r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--spin', default='spin', help='the spin program')
    ap.add_argument('--model', required=True, help='channel.pml')
    ap.add_argument('--cc', default=os.environ.get('CC', 'cc'),
                    help='C compiler command for pan.c (split like a shell)')
    ap.add_argument('--only', action='append', default=[],
                    help='run only this (repeatable); --list shows the names')
    ap.add_argument('--list', action='store_true', help='list the runs and exit')
    ap.add_argument('-v', '--verbose', action='store_true', help="print pan's reports")
    a = ap.parse_args()

    if a.list:
        for name, defs, expect, what in RUNS:
            print('%-18s %-8s %-38s %s' % (name, expect, ' '.join(defs) or '-', what))
        return 0
    spin = shutil.which(a.spin)
    if not spin:
        print('SKIP: spin not found (%s); Debian: apt-get install spin' % a.spin)
        return 77
    cc = shlex.split(a.cc)
    if not cc or not shutil.which(cc[0]):
        print('SKIP: no C compiler for pan.c (%s)' % a.cc)
        return 77
    runs = [x for x in RUNS if not a.only or x[0] in a.only]
    unknown = set(a.only) - {x[0] for x in RUNS}
    if unknown:
        print('unknown run(s): %s' % ', '.join(sorted(unknown)))
        return 1
    model = os.path.abspath(a.model)

    version = subprocess.run([spin, '-V'], stdout=subprocess.PIPE,
                             universal_newlines=True).stdout.strip()
    print('%s; model %s' % (version, model))
    print('%-18s %-8s %-6s %12s %6s %8s %8s  %s' %
          ('run', 'expect', 'result', 'states', 'depth', 'time_s', 'mem_mb', 'note'))
    failed = []
    with tempfile.TemporaryDirectory(prefix='aql-spin-') as work:
        for name, defs, expect, what in runs:
            try:
                out, r = run_one(spin, cc, model, work, name, defs, expect, a.verbose)
                bad = problems(out, r, expect)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                out, r, bad = str(e), {}, ['did not run: %s' % str(e).splitlines()[0]]
            note = '; '.join(bad) if bad else (
                what if expect in ('pass', 'reach') else 'found: ' + r.get('first_error', '?'))
            print('%-18s %-8s %-6s %12s %6s %8s %8s  %s' % (
                name, expect, 'FAIL' if bad else 'ok', r.get('states', '-'),
                r.get('depth', '-'), '%.1f' % r['time'] if 'time' in r else '-',
                '%.0f' % r['mem_mb'] if 'mem_mb' in r else '-', note), flush=True)
            if bad:
                failed.append(name)
                if not a.verbose:
                    print('--- %s: pan report ---\n%s\n---' % (name, out.strip()))
    if failed:
        print('FAILED: %s' % ', '.join(failed))
        return 1
    print('all %d runs as expected' % len(runs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
