#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Test tests/hil/pack and tests/hil/run without a GPU: the pack holds
every CUDA-agent test meson defines, with each file it names, the
libraries its programs need (never libcuda.so.1) and a run script; with no
driver both run and the pack's run exit 77 and say why. tests/hil/run-amd:
its tests are the KFD emulation's runs outside the emulation's own modes,
and with no /dev/kfd it exits 77 and says why.

usage: test_hil.py BUILD_DIR [unittest args]
"""

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HIL = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hil')
BUILD = None
sys.path.insert(0, HIL)
import hil  # noqa: E402


@functools.lru_cache(maxsize=None)
def has_driver():
    """Whether the system's own library path holds a libcuda.so.1; asked
    in a child, since the emulation on this one may be a sanitizer build
    that cannot load into python."""
    return subprocess.run([sys.executable, '-c', 'import ctypes; ctypes.CDLL("libcuda.so.1")'],
                          env=clean_env(), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def clean_env():
    return {k: v for k, v in os.environ.items()
            if k != 'LD_LIBRARY_PATH' and not hil.is_emu_var(k)}


class Pack(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, 'pack')
        p = subprocess.run([os.path.join(HIL, 'pack'), cls.out, BUILD], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        cls.rc, cls.log = p.returncode, p.stdout
        cls.manifest = hil.load_json(os.path.join(cls.out, 'hil-tests.json'))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_packed(self):
        self.assertEqual(self.rc, 0, self.log)
        self.assertTrue(os.access(os.path.join(self.out, 'run'), os.X_OK))
        for tool in ('aql-info', 'aql-bench'):
            self.assertTrue(os.access(os.path.join(self.out, 'build', 'tools', tool), os.X_OK))
        self.assertRegex(self.manifest['glibc'] or '2.0', r'^2\.\d+$')

    def test_every_cuda_test(self):
        intro = hil.load_json(os.path.join(BUILD, 'meson-info', 'intro-tests.json'))
        want = {t['name'] for t in intro if hil.on_cuda(t, hil.listed_suites())}
        self.assertEqual({t['name'] for t in self.manifest['tests']}, want)

    def test_paths_inside(self):
        for t in self.manifest['tests']:
            for v in t['cmd'] + list(t['env'].values()):
                if v.startswith(hil.PACK_TOKEN):
                    self.assertTrue(os.path.exists(v.replace(hil.PACK_TOKEN, self.out)), v)
                elif v.startswith('/'):
                    self.assertFalse(v.startswith(BUILD), '%s: %s left outside' % (t['name'], v))
                elif os.path.exists(os.path.join(BUILD, v)):
                    # Relative to the build directory, where tests run.
                    self.assertTrue(os.path.exists(os.path.join(self.out, 'build', v)), v)
            self.assertFalse(any(k.startswith('AQL_CUDA_EMU_') for k in t['env']), t)
            self.assertNotIn('cuda_emu', t['env'].get('LD_LIBRARY_PATH', ''))

    def test_libraries(self):
        libs = os.listdir(os.path.join(self.out, 'lib'))
        self.assertIn('libelf.so.1', libs)
        self.assertFalse([l for l in libs if l.startswith(('libcuda', 'libc.so', 'ld-linux'))],
                         libs)

    def test_no_driver_skips(self):
        if has_driver():
            self.skipTest('this machine has a libcuda.so.1')
        for cmd in ([os.path.join(self.out, 'run')], [os.path.join(HIL, 'run'), BUILD]):
            p = subprocess.run(cmd, env=clean_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120)
            self.assertEqual(p.returncode, 77, p.stdout)
            self.assertIn('no NVIDIA agent', p.stdout)
            self.assertIn('libcuda.so.1', p.stdout)

    def test_runs_each_test(self):
        """With a driver (the emulation under another name, so that run
        cannot tell it from a real one) every packed test runs, without the
        emulation's variables, and the summary counts them."""
        emu = os.path.join(BUILD, 'tests', 'cuda_emu', 'libcuda.so.1')
        if has_driver() or not os.path.exists(emu):
            self.skipTest('a real driver here, or no emulation built')
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(emu, d)
            env = clean_env()
            env['LD_LIBRARY_PATH'] = d
            env['AQL_CUDA_EMU_MODE'] = 'nomemops'
            p = subprocess.run([os.path.join(self.out, 'run')], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=1200)
        # No test may see the mode, so the probe reports the device's own path.
        self.assertIn('signals: device (stream memory operations)', p.stdout)
        names = [t['name'] for t in self.manifest['tests']] + ['aql-bench --agent cuda']
        verdicts = re.findall(r'(?m)^hil: (PASS|FAIL|SKIP) +(\S+)', p.stdout)
        self.assertEqual([n for _, n in verdicts], [n.split()[0] for n in names], p.stdout)
        m = re.search(r'hil: summary: (\d+) passed, (\d+) failed, (\d+) skipped \(of (\d+)\)',
                      p.stdout)
        self.assertTrue(m, p.stdout)
        self.assertEqual(int(m.group(4)), len(names))
        self.assertEqual(p.returncode, 1 if int(m.group(2)) else 0)
        self.assertTrue(os.path.exists(os.path.join(self.out, 'logs', 'bench.txt')))

    def test_refuses_nonempty(self):
        p = subprocess.run([os.path.join(HIL, 'pack'), self.out, BUILD],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('not empty', p.stdout)


class Amd(unittest.TestCase):
    def test_selection(self):
        intro = hil.load_json(os.path.join(BUILD, 'meson-info', 'intro-tests.json'))
        suites = hil.listed_suites(hil.AMD['suites'])
        picked = [t for t in intro if hil.on_amd(t, suites)]
        opts = hil.load_json(os.path.join(BUILD, 'meson-info', 'intro-buildoptions.json'))
        # -Dlight=true without a clang for AMDGPU leaves the queue suites out.
        if not [o for o in opts if o['name'] == 'light' and o['value']]:
            self.assertIn('kfd_queue_gfx90a', [t['name'] for t in picked])
        for t in picked:
            env = t.get('env') or {}
            self.assertIn('AQL_KFD_SYS', env, t['name'])
            self.assertFalse([k for k in hil.KFD_EMU_ONLY if k in env], t['name'])
            self.assertNotIn(t['name'], suites[1])
            self.assertFalse(hil.on_cuda(t, hil.listed_suites()), t['name'])
        env = hil.real_env(picked[0]['env'], None)
        self.assertFalse([k for k in env if hil.is_emu_var(k)], env)
        self.assertEqual(env['AQL_HIL'], '1')

    def test_no_kfd_skips(self):
        if os.path.exists('/dev/kfd'):
            self.skipTest('this machine has a /dev/kfd')
        p = subprocess.run([os.path.join(HIL, 'run-amd'), BUILD], env=clean_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 77, p.stdout)
        self.assertIn('no AMD agent, nothing run', p.stdout)
        self.assertIn('/dev/kfd', p.stdout)


def main():
    global BUILD
    BUILD = os.path.realpath(sys.argv[1])
    unittest.main(argv=[sys.argv[0]] + sys.argv[2:], verbosity=2)


if __name__ == '__main__':
    main()
