#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""aql-bench --quick --plot DIR: the table on stdout, the run's JSON lines
in DIR/aql-bench-dispatch.json (every latency row keeps its old fields and
gains its distribution, consistent with its percentiles; goals name the
rows they compare), and aql-bench-plot's PNG and SVG of every latency row,
each in one panel with its peer. aql-bench-plot alone on hand-made lines:
rows paired by "peer" and by goals, bad input refused. Skipped (77) when
matplotlib is not installed (Debian: python3-matplotlib).

usage: test_bench_plot.py AQL_BENCH AQL_BENCH_PLOT
"""

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

OLD_LATENCY_KEYS = ('metric', 'unit', 'p50', 'p99', 'p999', 'min', 'mean', 'samples')
SVG = '{http://www.w3.org/2000/svg}'
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print('FAIL: ' + what)


def run(cmd, env=None, want=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=600, env=env)
    if p.returncode != want:
        sys.exit('%s exited %d, not %d\n%s%s' % (' '.join(cmd), p.returncode, want,
                                                 p.stdout, p.stderr))
    return p.stdout, p.stderr


def svg_texts(path):
    """Every text of the SVG, per axes group (matplotlib's "axes_N" ids)."""
    root = ET.parse(path).getroot()
    panels = {}
    for g in root.iter(SVG + 'g'):
        gid = g.get('id', '')
        if gid.startswith('axes_'):
            panels[gid] = ' '.join(t for e in g.iter(SVG + 'text') for t in e.itertext())
    return panels


def check_pictures(out, mode, pairs, singles):
    png = os.path.join(out, 'aql-bench-%s.png' % mode)
    svg = os.path.join(out, 'aql-bench-%s.svg' % mode)
    with open(png, 'rb') as f:
        check(f.read(8) == b'\x89PNG\r\n\x1a\n', '%s is a PNG' % png)
    panels = svg_texts(svg)
    for a, b in pairs:
        check(any(a + ' ' in t and b + ' ' in t for t in panels.values()),
              '%s: %s and its peer %s in one panel' % (svg, a, b))
    for m in singles:
        check(any(m + ' ' in t for t in panels.values()), '%s: %s drawn' % (svg, m))


def plotter_alone(script, tmp):
    """The script on hand-made lines: pairs by peer and by goal."""
    def lat(metric, base, **extra):
        cdf = [[i / 100, base + i] for i in range(100)] + [[0.999, base + 150], [1, base + 200]]
        row = {'metric': metric, 'unit': 'ns', 'p50': base + 50, 'p99': base + 99,
               'p999': base + 150, 'min': base, 'mean': base + 50.0, 'samples': 1000,
               'cdf': cdf}
        row.update(extra)
        return json.dumps(row)
    lines = [lat('a_raw', 100), lat('a_typed', 120, peer='a_raw'), lat('b_peer', 300),
             lat('b_row', 310), lat('c_alone', 500),
             json.dumps({'metric': 'rate', 'unit': 'x/s', 'value': 1.0}),
             json.dumps({'metric': 'goal_b', 'num': 'b_row', 'den': 'b_peer', 'value': 1.03,
                         'goal': 1.1, 'cmp': '<=', 'met': True})]
    path = os.path.join(tmp, 'hand.json')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    out = os.path.join(tmp, 'hand')
    run([script, '--mode', 'hand', '--out', out, path])
    check_pictures(out, 'hand', [('a_typed', 'a_raw'), ('b_row', 'b_peer')],
                   ['a_raw', 'a_typed', 'b_peer', 'b_row', 'c_alone'])
    check(len(svg_texts(os.path.join(out, 'aql-bench-hand.svg'))) == 3,
          'three panels: two pairs and a row alone')
    with open(path, 'w') as f:
        f.write(json.dumps({'metric': 'rate', 'unit': 'x/s', 'value': 1.0}) + '\n')
    run([script, '--out', out, path], want=2)
    with open(path, 'w') as f:
        f.write('{"metric": \n')
    run([script, '--out', out, path], want=2)


def main():
    bench, script = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, 'probe.json')
        with open(probe, 'w') as f:
            f.write('{}\n')
        p = subprocess.run([script, '--out', tmp, probe], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        if p.returncode == 77:
            print('SKIP: ' + p.stderr.strip())
            return 77

        plotter_alone(script, tmp)
        run([bench, '--quick', '--contention', '1', '--plot', tmp], want=2)

        out = os.path.join(tmp, 'plots')
        stdout, _ = run([bench, '--quick', '--plot', out])
        check('latency (ns)' in stdout, 'the table still goes to stdout')
        rows, goals = {}, []
        with open(os.path.join(out, 'aql-bench-dispatch.json')) as f:
            for line in f:
                row = json.loads(line)
                if 'num' in row:
                    goals.append(row)
                elif row.get('unit') == 'ns' and 'p50' in row:
                    rows[row['metric']] = row
        check(len(rows) >= 4, 'latency rows in the JSON: %s' % sorted(rows))
        for m, row in rows.items():
            check(all(k in row for k in OLD_LATENCY_KEYS), '%s keeps its fields' % m)
            cdf = row.get('cdf', [])
            check(len(cdf) == 102, '%s: 102 distribution points, not %d' % (m, len(cdf)))
            if len(cdf) != 102:
                continue
            p = [pt[0] for pt in cdf]
            ns = [pt[1] for pt in cdf]
            check(p[0] == 0 and p[-1] == 1 and p == sorted(p), '%s: fractions 0 to 1' % m)
            check(ns == sorted(ns), '%s: values never fall' % m)
            at = dict(zip(p, ns))
            check(at[0] == row['min'] and at[0.5] == row['p50'] and at[0.99] == row['p99'] and
                  at[0.999] == row['p999'],
                  '%s: the distribution agrees with min, p50, p99, p99.9' % m)
        for g in goals:
            check(isinstance(g['num'], str), 'goal %s names its row' % g['metric'])
        pairs = [(g['num'], g['den']) for g in goals
                 if 'den' in g and g['num'] in rows and g['den'] in rows]
        pairs += [(m, r['peer']) for m, r in rows.items() if 'peer' in r and r['peer'] in rows]
        check(('launch_typed_ns', 'launch_raw_ns') in pairs,
              'launch_typed_ns names launch_raw_ns as its peer')
        check(any(n == 'dispatch_rtt_spin' for n, _ in pairs),
              'the goal of dispatch_rtt_spin names the rows it compares')
        check_pictures(out, 'dispatch', pairs, sorted(rows))

        # The script aql-bench runs: AQL_BENCH_PLOT, given the run's file.
        fake = os.path.join(tmp, 'fake-plot')
        with open(fake, 'w') as f:
            f.write('#!/bin/sh\necho "$@" > "%s/args"\nexit 77\n' % tmp)
        os.chmod(fake, 0o755)
        run([bench, '--quick', '--plot', out], env=dict(os.environ, AQL_BENCH_PLOT=fake),
            want=77)
        with open(os.path.join(tmp, 'args')) as f:
            check(f.read().split() == ['--mode', 'dispatch', '--out', out,
                                       os.path.join(out, 'aql-bench-dispatch.json')],
                  'aql-bench runs the script with the mode, the folder and the JSON file')
    print('%d failures' % len(failures))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
