#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Test aql-info: the CPU agent is always listed; each way of having no
CUDA agent gives its own reason; with the emulated driver (--emu-dir, the
directory holding tests/cuda_emu's libcuda.so.1) the NVIDIA agent is
listed with its architecture and the path its signals take.

usage: test_aql_info.py --info AQL_INFO [--emu-dir DIR] [--cuda-stub LIB]
                        [unittest args]

--cuda-stub: the toolkit's stub libcuda.so, run as libcuda.so.1.
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import unittest

INFO = None
EMU_DIR = None
CUDA_STUB = None

# Variables that would let a driver other than the one a test means in.
CUDA_ENV = ('LD_LIBRARY_PATH', 'AQL_CUDA_EMU_MODE', 'AQL_CUDA_EMU_DEVICES',
            'AQL_CUDA_EMU_FAIL_AFTER', 'CUDA_VISIBLE_DEVICES')


def run(*args, emu=False, **env):
    """aql-info args, with the emulated driver first on the path if emu;
    returns (exit status, stdout)."""
    e = {k: v for k, v in os.environ.items() if k not in CUDA_ENV}
    if emu:
        e['LD_LIBRARY_PATH'] = EMU_DIR
    e.update(env)
    p = subprocess.run([INFO] + list(args), env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    return p.returncode, p.stdout


def run_json(emu=False, **env):
    rc, out = run('--json', emu=emu, **env)
    return rc, json.loads(out)


def unavailable(doc, kind):
    return [u for u in doc['unavailable'] if u['kind'] == kind]


@functools.lru_cache(maxsize=None)
def system_has_driver():
    """Whether the system's own library path holds a libcuda.so.1; asked
    in a child, since the emulation on this one may be a sanitizer build
    that cannot load into python."""
    return subprocess.run([sys.executable, '-c', 'import ctypes; ctypes.CDLL("libcuda.so.1")'],
                          env={k: v for k, v in os.environ.items() if k not in CUDA_ENV}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


class NoDriver(unittest.TestCase):
    """This machine as the tests find it, with no emulation on the path."""

    def test_cpu_listed(self):
        rc, doc = run_json()
        self.assertEqual(rc, 0)
        cpu = [a for a in doc['agents'] if a['kind'] == 'cpu']
        self.assertEqual(len(cpu), 1, doc)
        self.assertGreater(cpu[0]['compute_units'], 0)
        self.assertGreater(cpu[0]['max_workgroup_size'], 0)
        self.assertEqual(cpu[0]['signal_path'], 'host')
        self.assertIsNone(cpu[0]['driver_version'])

    def test_nvidia_reason(self):
        if system_has_driver():
            self.skipTest('this machine has a libcuda.so.1')
        rc, doc = run_json()
        self.assertEqual(rc, 0)
        nv = unavailable(doc, 'nvidia')
        self.assertEqual(len(nv), 1, doc)
        self.assertTrue(nv[0]['status'].startswith('AQL_ERR_'), nv)
        self.assertTrue(nv[0]['reason'].strip(), nv)
        self.assertFalse([a for a in doc['agents'] if a['kind'] == 'nvidia'])

    def test_every_kind_accounted(self):
        _, doc = run_json()
        kinds = {a['kind'] for a in doc['agents']} | {u['kind'] for u in doc['unavailable']}
        self.assertEqual(kinds, {'cpu', 'nvidia', 'amd'})

    def test_text_forms(self):
        rc, out = run()
        self.assertEqual(rc, 0)
        self.assertIn('Agent 0', out)
        self.assertIn('Signal path:', out)
        self.assertIn('Unavailable:', out)
        if not system_has_driver():
            self.assertIn('  nvidia: AQL_ERR_', out)
        rc, out = run('-L')
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith('CPU 0: '), out)

    def test_toolkit_stub(self):
        """The toolkit's stub named libcuda.so.1 is told apart from a driver."""
        if not CUDA_STUB:
            self.skipTest('no --cuda-stub: no CUDA toolkit here')
        with tempfile.TemporaryDirectory() as d:
            os.symlink(CUDA_STUB, os.path.join(d, 'libcuda.so.1'))
            rc, doc = run_json(LD_LIBRARY_PATH=d)
        self.assertEqual(rc, 0)
        nv = unavailable(doc, 'nvidia')
        self.assertEqual(len(nv), 1, doc)
        self.assertEqual(nv[0]['status'], 'AQL_ERR_UNSUPPORTED', nv)
        self.assertIn('stub', nv[0]['reason'].lower())

    def test_usage(self):
        rc, out = run('--help')
        self.assertEqual(rc, 0)
        self.assertIn('usage: aql-info', out)
        rc, _ = run('--bogus')
        self.assertEqual(rc, 2)
        rc, _ = run('extra')
        self.assertEqual(rc, 2)


class Emulated(unittest.TestCase):
    """tests/cuda_emu's libcuda.so.1 and its modes."""

    def setUp(self):
        if not EMU_DIR:
            self.skipTest('no --emu-dir: the emulated driver is not built')

    def nvidia(self, doc):
        return [a for a in doc['agents'] if a['kind'] == 'nvidia']

    def test_agent_listed(self):
        rc, doc = run_json(emu=True)
        self.assertEqual(rc, 0)
        nv = self.nvidia(doc)
        self.assertEqual(len(nv), 1, doc)
        a = nv[0]
        self.assertEqual(a['isa'], 'sm_90')
        self.assertEqual(a['wavefront_size'], 32)
        self.assertEqual(a['signal_path'], 'device (stream memory operations)')
        self.assertGreater(a['compute_units'], 0)
        self.assertGreater(a['memory_size'], 0)
        self.assertFalse(a['unified_memory'])
        self.assertGreaterEqual(a['max_group_segment_size'],
                                a['default_group_segment_size'])
        self.assertRegex(a['driver_version'], r'^1[2-9]\.[0-9]$')
        self.assertFalse(unavailable(doc, 'nvidia'), doc)
        rc, out = run('-L', emu=True)
        self.assertRegex(out, r'(?m)^GPU 0: .* \(sm_90\)$')
        rc, out = run(emu=True)
        self.assertIn('device (stream memory operations)', out)

    def test_two_devices(self):
        rc, doc = run_json(emu=True, AQL_CUDA_EMU_DEVICES='2')
        self.assertEqual(rc, 0)
        self.assertEqual([a['index'] for a in self.nvidia(doc)], [0, 1])
        rc, doc = run_json(emu=True, AQL_CUDA_EMU_DEVICES='2', CUDA_VISIBLE_DEVICES='1')
        self.assertEqual([a['index'] for a in self.nvidia(doc)], [0])

    def test_nomemops_uses_host_callback(self):
        rc, doc = run_json(emu=True, AQL_CUDA_EMU_MODE='nomemops')
        self.assertEqual(rc, 0)
        nv = self.nvidia(doc)
        self.assertEqual(len(nv), 1, doc)
        self.assertEqual(nv[0]['signal_path'], 'host callback (cuLaunchHostFunc)')

    def reason(self, **env):
        rc, doc = run_json(emu=True, **env)
        self.assertEqual(rc, 0, 'the CPU agent must still be listed')
        self.assertTrue([a for a in doc['agents'] if a['kind'] == 'cpu'])
        self.assertFalse(self.nvidia(doc), doc)
        nv = unavailable(doc, 'nvidia')
        self.assertEqual(len(nv), 1, doc)
        return nv[0]['status'], nv[0]['reason']

    def test_reasons_differ(self):
        """Each way of having no CUDA agent says which it is."""
        found = {
            'stub': self.reason(AQL_CUDA_EMU_MODE='stub'),
            'old': self.reason(AQL_CUDA_EMU_MODE='old'),
            'nodevice': self.reason(AQL_CUDA_EMU_MODE='nodevice'),
            'hidden': self.reason(CUDA_VISIBLE_DEVICES=''),
        }
        self.assertEqual(found['stub'][0], 'AQL_ERR_UNSUPPORTED', found)
        self.assertIn('stub', found['stub'][1].lower())
        self.assertEqual(found['old'][0], 'AQL_ERR_UNSUPPORTED', found)
        self.assertRegex(found['old'][1], r'11\.8|11080')
        self.assertEqual(found['nodevice'][0], 'AQL_ERR_NOT_FOUND', found)
        self.assertEqual(found['hidden'][0], 'AQL_ERR_NOT_FOUND', found)
        self.assertIn('CUDA_VISIBLE_DEVICES', found['hidden'][1])
        reasons = [r for _, r in found.values()]
        self.assertEqual(len(set(reasons)), len(reasons), found)

    def test_no_driver_reason(self):
        """Not the emulation's: a path with no libcuda.so.1 at all."""
        if system_has_driver():
            self.skipTest('this machine has a libcuda.so.1')
        st, why = self.reason(LD_LIBRARY_PATH='/nonexistent')
        self.assertEqual(st, 'AQL_ERR_NOT_FOUND')
        self.assertIn('libcuda.so.1', why)
        _, stub = self.reason(AQL_CUDA_EMU_MODE='stub')
        self.assertNotEqual(why, stub)


def main():
    global INFO, EMU_DIR, CUDA_STUB
    ap = argparse.ArgumentParser()
    ap.add_argument('--info', required=True)
    ap.add_argument('--emu-dir')
    ap.add_argument('--cuda-stub')
    args, rest = ap.parse_known_args()
    INFO = os.path.abspath(args.info)
    CUDA_STUB = args.cuda_stub
    EMU_DIR = os.path.abspath(args.emu_dir) if args.emu_dir else None
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == '__main__':
    main()
