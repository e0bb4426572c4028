#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Test aql-info: the CPU agent is always listed; each way of having no
CUDA or AMD agent gives its own reason; with the emulated driver (--emu-dir,
the directory holding tests/cuda_emu's libcuda.so.1) the NVIDIA agent is
listed with its architecture and the path its signals take; with the KFD
emulation (--kfd-emu, tests/kfd_emu's library) the AMD agents are listed
with their target IDs, topology and libdrm's view, marked as emulated.

usage: test_aql_info.py --info AQL_INFO [--emu-dir DIR] [--cuda-stub LIB]
                        [--kfd-emu LIB] [unittest args]

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
KFD_EMU = None

# Variables that would let a driver other than the one a test means in.
CUDA_ENV = ('LD_LIBRARY_PATH', 'AQL_CUDA_EMU_MODE', 'AQL_CUDA_EMU_DEVICES',
            'AQL_CUDA_EMU_FAIL_AFTER', 'CUDA_VISIBLE_DEVICES')
KFD_ENV = ('AQL_KFD_SYS', 'AQL_KFD_EMU_GPUS', 'AQL_KFD_EMU_VERSION', 'AQL_KFD_EMU_FAIL',
           'AQL_KFD_EMU_XNACK', 'AQL_KFD_EMU_BAR', 'AQL_KFD_EMU_VRAM', 'AQL_KFD_EMU_DENY',
           'AQL_KFD_EMU_NO_RENDER')


def run(*args, emu=False, **env):
    """aql-info args, with the emulated driver first on the path if emu;
    returns (exit status, stdout)."""
    e = {k: v for k, v in os.environ.items() if k not in CUDA_ENV + KFD_ENV}
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

    def test_amd_reason(self):
        """The real KFD table: no /dev/kfd where the tests run."""
        if os.path.exists('/dev/kfd'):
            self.skipTest('this machine has /dev/kfd')
        rc, doc = run_json()
        self.assertEqual(rc, 0)
        amd = unavailable(doc, 'amd')
        self.assertEqual(len(amd), 1, doc)
        self.assertEqual(amd[0]['status'], 'AQL_ERR_NOT_FOUND', amd)
        self.assertIn('no /dev/kfd', amd[0]['reason'])
        self.assertFalse([a for a in doc['agents'] if a['kind'] == 'amd'])

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


class KfdEmulated(unittest.TestCase):
    """tests/kfd_emu's KFD and its settings."""

    def setUp(self):
        if not KFD_EMU:
            self.skipTest('no --kfd-emu: the KFD emulation is not built')

    def amd(self, doc):
        return [a for a in doc['agents'] if a['kind'] == 'amd']

    def test_agents_listed(self):
        rc, doc = run_json(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a,gfx942')
        self.assertEqual(rc, 0)
        amd = self.amd(doc)
        self.assertEqual([a['index'] for a in amd], [0, 1], doc)
        self.assertEqual([a['name'] for a in amd], ['gfx90a', 'gfx942'])
        self.assertEqual([a['isa'] for a in amd],
                         ['gfx90a:sramecc+:xnack-', 'gfx942:sramecc+:xnack-'])
        self.assertEqual([a['compute_units'] for a in amd], [110, 304])
        self.assertEqual([a['amd']['xccs'] for a in amd], [1, 8])
        self.assertEqual([a['amd']['chip_id'] for a in amd], [0x740c, 0x74a1])
        for a in amd:
            self.assertEqual(a['wavefront_size'], 64)
            self.assertEqual(a['max_group_segment_size'], 65536)
            self.assertEqual(a['signal_path'], 'device (command processor)')
            self.assertEqual(a['driver_version'], '1.18')
            self.assertFalse(a['unified_memory'])
            self.assertTrue(a['amd']['emulated_by'].startswith('kfd-emu'), a)
            self.assertRegex(a['amd']['pci_address'], r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
        self.assertFalse(unavailable(doc, 'amd'), doc)
        rc, out = run('-L', AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a,gfx942')
        self.assertRegex(out, r'(?m)^GPU 0: gfx90a \(gfx90a:sramecc\+:xnack-\) \(emulated by kfd-emu')
        self.assertRegex(out, r'(?m)^GPU 1: gfx942 ')
        rc, out = run(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx942')
        self.assertIn('Chip ID:                     0x74a1', out)
        self.assertIn('XCCs:                        8', out)
        self.assertIn('(emulated by kfd-emu', out)

    def test_libdrm_listed(self):
        """What libdrm says of each GPU: the emulation's models."""
        rc, doc = run_json(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a,gfx942')
        self.assertEqual(rc, 0)
        drm = [a['amd']['drm'] for a in self.amd(doc)]
        self.assertEqual([a['amd']['drm_error'] for a in self.amd(doc)], [None, None])
        self.assertEqual([d['marketing_name'] for d in drm],
                         ['AMD Instinct MI250X / MI250', 'AMD Instinct MI300X'])
        self.assertEqual([d['max_engine_clock_mhz'] for d in drm], [1700, 2100])
        self.assertEqual([d['max_memory_clock_mhz'] for d in drm], [1600, 1300])
        self.assertEqual([d['vram']['total'] for d in drm], [64 << 30, 192 << 30])
        self.assertEqual([d['visible_vram']['total'] for d in drm], [64 << 30, 192 << 30])
        for a, d in zip(self.amd(doc), drm):
            self.assertEqual(d['asic_id'], a['amd']['chip_id'])
            self.assertEqual(d['firmware']['mec'], a['amd']['mec_fw'])
            self.assertEqual(d['firmware']['sdma'], a['amd']['sdma_fw'])
            self.assertEqual(d['vram']['total'], a['memory_size'])
            self.assertGreater(d['gtt']['total'], 0)
        rc, out = run(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a')
        self.assertIn('Marketing Name:              AMD Instinct MI250X / MI250\n', out)
        self.assertIn('Max memory clock:            1600 MHz\n', out)
        self.assertIn('VRAM:                        65536 MiB\n', out)
        self.assertIn('Host-visible VRAM size:      65536 MiB\n', out)
        self.assertRegex(out, r'GTT: +[1-9][0-9]* MiB\n')
        self.assertRegex(out, r'Firmware, RLC: +[1-9][0-9]* \(0x[0-9a-f]{8}\)\n')
        self.assertNotIn('unknown', out)

    def test_libdrm_small_bar(self):
        rc, doc = run_json(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a',
                           AQL_KFD_EMU_BAR='small')
        self.assertEqual(rc, 0)
        drm = self.amd(doc)[0]['amd']['drm']
        self.assertEqual(drm['vram']['total'], 64 << 30)
        self.assertEqual(drm['visible_vram']['total'], 256 << 20)
        self.assertFalse(self.amd(doc)[0]['amd']['large_bar'])

    def test_libdrm_failure(self):
        """libdrm's query failing: the agents are listed, its fields are
        unknown and the reason is printed once per agent."""
        env = dict(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a,gfx942',
                   AQL_KFD_EMU_FAIL='drm_query')
        rc, doc = run_json(**env)
        self.assertEqual(rc, 0)
        amd = self.amd(doc)
        self.assertEqual([a['name'] for a in amd], ['gfx90a', 'gfx942'], doc)
        self.assertFalse(unavailable(doc, 'amd'), doc)
        for a in amd:
            self.assertIsNone(a['amd']['drm'])
            self.assertEqual(a['amd']['drm_error'],
                             'libdrm: amdgpu_device_initialize: -EBADF (Bad file descriptor)')
        rc, out = run(**env)
        self.assertEqual(rc, 0)
        self.assertEqual(out.count('libdrm: amdgpu_device_initialize: -EBADF'), 2, out)
        self.assertIn('Marketing Name:              unknown (libdrm: ', out)
        self.assertIn('GTT:                         unknown\n', out)
        self.assertIn('Firmware, SMC:               unknown\n', out)
        self.assertIn('Compute units:               304\n', out)
        rc, doc = run_json(**dict(env, AQL_KFD_EMU_FAIL='drm_query=EIO'))
        self.assertIn(': -EIO (', self.amd(doc)[0]['amd']['drm_error'])

    def test_xnack_and_version(self):
        rc, doc = run_json(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a',
                           AQL_KFD_EMU_XNACK='1', AQL_KFD_EMU_VERSION='1.11')
        self.assertEqual(rc, 0)
        amd = self.amd(doc)
        self.assertEqual(len(amd), 1, doc)
        self.assertEqual(amd[0]['isa'], 'gfx90a:sramecc+:xnack+')
        self.assertEqual(amd[0]['driver_version'], '1.11')

    def reason(self, **env):
        rc, doc = run_json(**env)
        self.assertEqual(rc, 0, 'the CPU agent must still be listed')
        self.assertFalse(self.amd(doc), doc)
        amd = unavailable(doc, 'amd')
        self.assertEqual(len(amd), 1, doc)
        return amd[0]['status'], amd[0]['reason']

    def test_reasons_differ(self):
        """Each way of having no AMD agent says which it is."""
        found = {
            'nokfd': self.reason(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_FAIL='open_kfd'),
            'perm': self.reason(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_FAIL='open_kfd=EACCES'),
            'old': self.reason(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_VERSION='1.10'),
            'nogpu': self.reason(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS=''),
            'nolib': self.reason(AQL_KFD_SYS='/nonexistent/libaqlkfdemu.so'),
        }
        self.assertEqual(found['nokfd'][0], 'AQL_ERR_NOT_FOUND', found)
        self.assertIn('/dev/kfd', found['nokfd'][1])
        self.assertEqual(found['perm'][0], 'AQL_ERR_SYSTEM', found)
        self.assertIn('render', found['perm'][1])
        self.assertEqual(found['old'][0], 'AQL_ERR_UNSUPPORTED', found)
        self.assertIn('KFD 1.10', found['old'][1])
        self.assertEqual(found['nogpu'][0], 'AQL_ERR_NOT_FOUND', found)
        self.assertEqual(found['nolib'][0], 'AQL_ERR_NOT_FOUND', found)
        self.assertIn('/nonexistent/libaqlkfdemu.so', found['nolib'][1])
        reasons = [r for _, r in found.values()]
        self.assertEqual(len(set(reasons)), len(reasons), found)

    def test_render_refused_listed(self):
        """A GPU whose render node is refused is reported; the CPU agent stays."""
        rc, doc = run_json(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a',
                           AQL_KFD_EMU_FAIL='open_render')
        self.assertEqual(rc, 0)
        self.assertFalse(self.amd(doc), doc)
        amd = unavailable(doc, 'amd')
        self.assertEqual(len(amd), 1, doc)
        self.assertEqual(amd[0]['status'], 'AQL_ERR_SYSTEM', amd)
        self.assertIn('/dev/dri/renderD128', amd[0]['reason'])
        self.assertIn('render group', amd[0]['reason'])

    def test_container_nodes(self):
        """In a container: a GPU the device cgroup denies and one without its
        render node are listed with their reasons; the third is the agent."""
        env = dict(AQL_KFD_SYS=KFD_EMU, AQL_KFD_EMU_GPUS='gfx90a,gfx942,gfx90a',
                   AQL_KFD_EMU_DENY='2', AQL_KFD_EMU_NO_RENDER='3')
        rc, doc = run_json(**env)
        self.assertEqual(rc, 0, doc)
        agents = self.amd(doc)
        self.assertEqual([a['name'] for a in agents], ['gfx90a'], doc)
        amd = unavailable(doc, 'amd')
        self.assertEqual(len(amd), 2, doc)
        self.assertEqual(amd[0]['status'], 'AQL_ERR_SYSTEM', amd)
        self.assertTrue(amd[0]['reason'].startswith('KFD node 2: '), amd)
        self.assertIn('device cgroup', amd[0]['reason'])
        self.assertIn('Operation not permitted', amd[0]['reason'])
        self.assertEqual(amd[1]['status'], 'AQL_ERR_NOT_FOUND', amd)
        self.assertTrue(amd[1]['reason'].startswith('KFD node 3 ('), amd)
        self.assertIn('no render node /dev/dri/renderD130', amd[1]['reason'])
        rc, out = run(**env)
        self.assertEqual(rc, 0, out)
        self.assertIn('Unavailable:', out)
        self.assertIn('KFD node 2: ', out)
        self.assertIn('KFD node 3 (', out)


def main():
    global INFO, EMU_DIR, CUDA_STUB, KFD_EMU
    ap = argparse.ArgumentParser()
    ap.add_argument('--info', required=True)
    ap.add_argument('--emu-dir')
    ap.add_argument('--cuda-stub')
    ap.add_argument('--kfd-emu')
    args, rest = ap.parse_known_args()
    INFO = os.path.abspath(args.info)
    CUDA_STUB = args.cuda_stub
    KFD_EMU = os.path.abspath(args.kfd_emu) if args.kfd_emu else None
    EMU_DIR = os.path.abspath(args.emu_dir) if args.emu_dir else None
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == '__main__':
    main()
