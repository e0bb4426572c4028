#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hardware-in-the-loop: the CUDA-agent suites and aql-bench --agent cuda
against the real driver, or the AMD-agent ones and aql-bench --agent amd
against the kernel's /dev/kfd (see README.md here).

  hil.py run BUILD_DIR      run from a meson build directory
  hil.py run-amd BUILD_DIR  the same for the AMD agent
  hil.py pack OUTDIR BUILD_DIR
                            copy what a GPU machine without build tools
                            needs into OUTDIR, with OUTDIR/run
  hil.py run-pack PACK_DIR  what OUTDIR/run does

A test is a CUDA-agent test when its meson definition runs it on the
emulated driver (an environment naming tests/cuda_emu,
AQL_CUDA_EMU_KERNELS or AQL_TEST_AGENT=nvidia) but not in one of the
emulation's own modes (AQL_CUDA_EMU_MODE, _FAIL_AFTER, _DEVICES), or when
tests/hil/suites names it; suites also names the tests never to run
here. It runs with the emulation taken out of its environment and
AQL_HIL=1 set, so that a test can leave out what only the emulation can
do (its counters, aqlemu_stats).

An AMD-agent test is one meson runs on the KFD emulation (AQL_KFD_SYS in
its environment) in none of the emulation's own modes (KFD_EMU_ONLY), or
one tests/hil/suites-amd names; it runs without AQL_KFD_SYS and
AQL_KFD_EMU_*, so aql opens /dev/kfd, and with AQL_HIL=1.

Exit status: 0 all passed, 77 no NVIDIA (AMD) agent (the reason is
printed), 1 a test or the bench failed, 2 a usage error.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
PACK_TOKEN = '@PACK@'
PACK_LIMIT = 60 << 20
# Supplied by any machine the pack may go to; libcuda.so.1 must be the
# driver's own, never a copy.
SYSTEM_LIBS = ('linux-vdso', 'ld-linux', 'libc.so', 'libm.so', 'libdl.so',
               'libpthread.so', 'librt.so', 'libresolv.so', 'libgcc_s.so',
               'libstdc++.so', 'libcuda.so', 'libnvidia-')


def load_json(path):
    with open(path) as f:
        return json.load(f)


def is_emu_path(p):
    return 'cuda_emu' in p


# Per vendor: aql-info's agent kind, the suites file, aql-bench's --agent.
CUDA = {'kind': 'nvidia', 'name': 'NVIDIA', 'suites': 'suites', 'bench': 'cuda'}
AMD = {'kind': 'amd', 'name': 'AMD', 'suites': 'suites-amd', 'bench': 'amd'}


def listed_suites(name='suites'):
    """(names to run, names never to run) from tests/hil/NAME."""
    run, skip = set(), set()
    path = os.path.join(HERE, name)
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.split('#', 1)[0].strip()
                if line.startswith('!'):
                    skip.add(line[1:].strip())
                elif line:
                    run.add(line.split()[0])
    return run, skip


# Knobs that make a run a test of the emulation's own behaviour (its
# failure modes, device counts): the real driver has none of them.
EMU_ONLY = ('AQL_CUDA_EMU_MODE', 'AQL_CUDA_EMU_FAIL_AFTER', 'AQL_CUDA_EMU_DEVICES')


def on_cuda(t, suites):
    run, skip = suites
    env = t.get('env') or {}
    if t['name'] in skip:
        return False
    if t['name'] in run:
        return True
    if any(k in env for k in EMU_ONLY):
        return False
    return (env.get('AQL_TEST_AGENT') == 'nvidia' or 'AQL_CUDA_EMU_KERNELS' in env or
            any(is_emu_path(v) for v in env.values()))


# The KFD emulation's knobs that make a run a test of the emulation
# itself: its failures, KFD versions and rules, BAR and XNACK settings,
# VRAM sizes, containers' nodes and clock rates the real GPU does not have.
KFD_EMU_ONLY = ('AQL_KFD_EMU_FAIL', 'AQL_KFD_EMU_VERSION', 'AQL_KFD_EMU_CHECKS',
                'AQL_KFD_EMU_BAR', 'AQL_KFD_EMU_XNACK', 'AQL_KFD_EMU_VRAM',
                'AQL_KFD_EMU_DENY', 'AQL_KFD_EMU_NO_RENDER', 'AQL_KFD_EMU_GPU_CLOCK_HZ')


def on_amd(t, suites):
    run, skip = suites
    env = t.get('env') or {}
    if t['name'] in skip:
        return False
    if t['name'] in run:
        return True
    # An empty model list is the emulation's machine without a GPU.
    if any(k in env for k in KFD_EMU_ONLY) or env.get('AQL_KFD_EMU_GPUS') == '':
        return False
    return 'AQL_KFD_SYS' in env


def is_emu_var(k):
    return k.startswith(('AQL_CUDA_EMU_', 'AQL_KFD_EMU_')) or k == 'AQL_KFD_SYS'


def real_env(test_env, libdir):
    """The test's environment with the emulations taken out."""
    env = {k: v for k, v in os.environ.items() if not is_emu_var(k)}
    outer = env.get('LD_LIBRARY_PATH', '')
    for k, v in (test_env or {}).items():
        if not is_emu_var(k):
            env[k] = v
    # The test's own library folders, then the caller's: a driver found
    # through LD_LIBRARY_PATH (as in many containers) stays found.
    paths = []
    for p in env.get('LD_LIBRARY_PATH', '').split(':') + outer.split(':'):
        if p and not is_emu_path(p) and 'kfd_emu' not in p and p not in paths:
            paths.append(p)
    if libdir:
        paths.insert(0, libdir)
    if paths:
        env['LD_LIBRARY_PATH'] = ':'.join(paths)
    else:
        env.pop('LD_LIBRARY_PATH', None)
    env['AQL_HIL'] = '1'
    # An ASan build's shadow gap is address space the driver needs: with
    # it protected, cuInit fails with CUDA_ERROR_OUT_OF_MEMORY.
    asan = env.get('ASAN_OPTIONS', '')
    if 'protect_shadow_gap' not in asan:
        env['ASAN_OPTIONS'] = (asan + ':' if asan else '') + 'protect_shadow_gap=0'
    return env


def probe(info, libdir, target, found=None):
    """None when an agent of target's kind opens, else the reason; found
    (a list) gets the processor name of each agent of the kind."""
    try:
        p = subprocess.run([info, '--json'], env=real_env({}, libdir), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    except OSError as e:
        return '%s: %s' % (info, e)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        return 'aql-info --json failed (exit %d): %s' % (p.returncode, p.stderr.strip())
    gpus = [a for a in doc['agents'] if a['kind'] == target['kind']]
    if found is not None:
        found.extend(a['name'] for a in gpus)
    for a in gpus:
        if target is CUDA:
            print('hil: GPU %d: %s (%s), driver %s, signals: %s' % (
                a['index'], a['name'], a['isa'], a['driver_version'], a['signal_path']))
        else:
            print('hil: GPU %d: %s (%s)' % (a['index'], a['name'], a['isa']))
    if gpus:
        return None
    why = [u for u in doc['unavailable'] if u['kind'] == target['kind']]
    return ('; '.join('%s: %s' % (u['status'], u['reason']) for u in why) or
            'no %s agent' % target['name'])


def run_one(name, cmd, env, cwd, timeout, logdir):
    log = os.path.join(logdir, name.replace('/', '_') + '.log')
    t0 = time.monotonic()
    try:
        with open(log, 'w') as f:
            rc = subprocess.run(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = 'timeout'
    except OSError as e:
        with open(log, 'a') as f:
            f.write('cannot run %s: %s\n' % (cmd[0], e))
        rc = 'cannot run'
    dt = time.monotonic() - t0
    verdict = 'PASS' if rc == 0 else 'SKIP' if rc == SKIP else 'FAIL'
    print('hil: %-4s %-32s %7.1f s%s' % (verdict, name, dt,
                                         '' if rc in (0, SKIP) else '  (%s)' % rc))
    if verdict == 'FAIL':
        with open(log) as f:
            tail = f.read()[-3000:]
        print('---- %s (last lines; whole log: %s)\n%s\n----' % (name, log, tail.rstrip()))
    return verdict


def run(root, tests, logdir, libdir, subst, target=CUDA):
    """Run tests (target's agent tests only) and the bench; root: the build
    directory (its tools/ and tests/ inside)."""
    os.makedirs(logdir, exist_ok=True)
    info = os.path.join(root, 'tools', 'aql-info')
    bench = os.path.join(root, 'tools', 'aql-bench')
    label = 'aql-bench --agent ' + target['bench']
    gfx = []
    why = probe(info, libdir, target, gfx)
    if why:
        print('hil: no %s agent, nothing run: %s' % (target['name'], why))
        return SKIP
    verdicts = {}
    names = {t['name'] for t in tests}
    for name in sorted(listed_suites(target['suites'])[0] - names):
        print('hil: FAIL %-32s not in this build' % name)
        verdicts[name] = 'FAIL'
    for t in tests:
        # A run of another model's code objects (agent 0 is the first of
        # the emulated models) does not fit this GPU.
        model = ((t.get('env') or {}).get('AQL_KFD_EMU_GPUS') or '').split(',')[0]
        if target is AMD and model and gfx and model != gfx[0]:
            print('hil: SKIP %-32s for %s; agent 0 here is %s' % (t['name'], model, gfx[0]))
            verdicts[t['name']] = 'SKIP'
            continue
        cmd = [subst(c) for c in t['cmd']]
        if os.path.basename(cmd[0]).startswith('python3'):
            cmd[0] = sys.executable
        env = real_env({k: subst(v) for k, v in (t.get('env') or {}).items()}, libdir)
        cwd = subst(t['workdir']) if t.get('workdir') else root
        timeout = max(60, 2 * (t.get('timeout') or 300))
        verdicts[t['name']] = run_one(t['name'], cmd, env, cwd, timeout, logdir)
    print('hil: %s (output also in %s)' % (label, os.path.join(logdir, 'bench.txt')))
    sys.stdout.flush()
    with open(os.path.join(logdir, 'bench.txt'), 'w') as f:
        p = subprocess.Popen([bench, '--agent', target['bench']], env=real_env({}, libdir),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in p.stdout:
            sys.stdout.write(line)
            f.write(line)
        rc = p.wait()
    verdicts[label] = 'PASS' if rc == 0 else 'FAIL'
    print('hil: %s %s%s' % (verdicts[label], label, '' if rc == 0 else '  (%d)' % rc))
    count = {v: sum(1 for x in verdicts.values() if x == v) for v in ('PASS', 'FAIL', 'SKIP')}
    print('hil: summary: %d passed, %d failed, %d skipped (of %d)%s' % (
        count['PASS'], count['FAIL'], count['SKIP'], len(verdicts),
        ''.join('\nhil:   failed: ' + n for n, v in verdicts.items() if v == 'FAIL')))
    return 1 if count['FAIL'] else 0


def build_tests(build):
    path = os.path.join(build, 'meson-info', 'intro-tests.json')
    try:
        return load_json(path)
    except OSError as e:
        sys.exit('hil: %s is not a configured meson build directory: %s' % (build, e))


def cmd_run(build):
    build = os.path.abspath(build)
    tests = [t for t in build_tests(build) if on_cuda(t, listed_suites())]
    return run(build, tests, os.path.join(build, 'hil-logs'), None, lambda s: s)


def cmd_run_amd(build):
    build = os.path.abspath(build)
    tests = [t for t in build_tests(build) if on_amd(t, listed_suites(AMD['suites']))]
    return run(build, tests, os.path.join(build, 'hil-logs-amd'), None, lambda s: s, AMD)


def cmd_run_pack(pack):
    pack = os.path.abspath(pack)
    manifest = load_json(os.path.join(pack, 'hil-tests.json'))
    need = manifest.get('glibc')
    have = os.confstr('CS_GNU_LIBC_VERSION').split()[-1]
    if need and tuple(map(int, have.split('.'))) < tuple(map(int, need.split('.'))):
        print('hil: this machine has glibc %s; the packed programs need %s' % (have, need))
        return 1
    return run(os.path.join(pack, 'build'), manifest['tests'], os.path.join(pack, 'logs'),
               os.path.join(pack, 'lib'), lambda s: s.replace(PACK_TOKEN, pack))


def is_elf(path):
    try:
        with open(path, 'rb') as f:
            return f.read(4) == b'\x7fELF'
    except OSError:
        return False


def elf_machine(path):
    try:
        with open(path, 'rb') as f:
            head = f.read(20)
    except OSError:
        return None
    return head[18:20] if head[:4] == b'\x7fELF' and len(head) == 20 else None


def is_host_elf(path):
    """An ELF file for this machine's processor (not a cubin or a GPU code
    object, which the tests read byte for byte)."""
    m = elf_machine(path)
    return m is not None and m == elf_machine(sys.executable)


def needed_libs(path):
    """soname -> resolved path for every library ldd finds, system ones left out."""
    p = subprocess.run(['ldd', path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    libs = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == '=>':
            if parts[2] == 'not':
                sys.exit('hil: %s needs %s, which this machine lacks' % (path, parts[0]))
            if not parts[0].startswith(SYSTEM_LIBS):
                libs[parts[0]] = parts[2]
    return libs


def glibc_needed(paths):
    best = (0, 0)
    if not shutil.which('objdump'):
        return None
    for path in paths:
        out = subprocess.run(['objdump', '-T', path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        for m in re.finditer(r'GLIBC_(\d+)\.(\d+)', out):
            best = max(best, (int(m.group(1)), int(m.group(2))))
    return '.'.join(map(str, best)) if best != (0, 0) else None


def sanitized(build):
    """The build's b_sanitize, 'none' where meson does not say."""
    try:
        opts = load_json(os.path.join(build, 'meson-info', 'intro-buildoptions.json'))
    except OSError:
        return 'none'
    return next((o['value'] for o in opts if o['name'] == 'b_sanitize'), 'none')


def cmd_pack(out, build):
    build = os.path.abspath(build)
    src = os.path.dirname(os.path.dirname(HERE))
    out = os.path.abspath(out)
    tests = [t for t in build_tests(build) if on_cuda(t, listed_suites())]
    if os.path.exists(out) and os.listdir(out):
        sys.exit('hil: %s exists and is not empty' % out)
    os.makedirs(os.path.join(out, 'lib'), exist_ok=True)
    copied = set()

    def take(path):
        """Copy path (a file or directory of the build or source tree) into
        the pack; returns how the manifest names it."""
        real = os.path.realpath(path)
        for top, name in ((build, 'build'), (src, 'src')):
            if real == top or real.startswith(top + os.sep):
                rel = os.path.join(name, os.path.relpath(real, top))
                dst = os.path.join(out, rel)
                if os.path.isfile(real) and real not in copied:
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy2(real, dst)
                    copied.add(real)
                    # Debug info would take a sanitizer build's pack past
                    # the device's carry limit; the symbols stay, so
                    # reports still name functions.
                    if is_host_elf(real) and shutil.which('objcopy'):
                        subprocess.run(['objcopy', '--strip-debug', dst], check=True)
                elif os.path.isdir(real):
                    os.makedirs(dst, exist_ok=True)
                    # A source folder a test names holds its fixtures
                    # (tests/co/nv): its files go along.
                    if name == 'src' and real != top:
                        for f in os.listdir(real):
                            if os.path.isfile(os.path.join(real, f)):
                                take(os.path.join(real, f))
                return os.path.join(PACK_TOKEN, rel)
        return path

    packed = []
    for t in tests:
        t = dict(t)
        cmd = list(t['cmd'])
        if os.path.basename(cmd[0]).startswith('python3'):
            cmd[0] = 'python3'
            # A script's helpers beside it go along.
            d = os.path.dirname(os.path.realpath(cmd[1]))
            for f in os.listdir(d):
                if f.endswith('.py'):
                    take(os.path.join(d, f))
        for c in cmd[1:]:
            # Meson runs tests in the build directory: relative arguments
            # name its files, and stay relative (run's cwd is the pack's build/).
            if not c.startswith('/') and os.path.isfile(os.path.join(build, c)):
                take(os.path.join(build, c))
        t['cmd'] = [take(c) if c.startswith('/') and os.path.exists(c) else c for c in cmd]
        t['env'] = {k: take(v) if v.startswith('/') and os.path.exists(v) else v
                    for k, v in (t.get('env') or {}).items() if not k.startswith('AQL_CUDA_EMU_')
                    and not (k == 'LD_LIBRARY_PATH' and is_emu_path(v))}
        t['workdir'] = take(t['workdir']) if t.get('workdir') else None
        packed.append({k: t[k] for k in ('name', 'cmd', 'env', 'workdir', 'timeout')})
    take(os.path.join(build, 'tools', 'aql-info'))
    take(os.path.join(build, 'tools', 'aql-bench'))
    # The kernels the suites read by path.
    for top, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if not d.startswith(('meson-', 'hil-')) and 'cuda_emu' not in d]
        for f in files:
            if f.endswith(('.ptx', '.cubin', '.fatbin', '.host.so')):
                take(os.path.join(top, f))
    elves = [p for p in copied if is_elf(p)]
    libs = {}
    for p in elves:
        libs.update(needed_libs(p))
    for soname, path in libs.items():
        shutil.copy2(path, os.path.join(out, 'lib', soname))
    with open(os.path.join(out, 'hil-tests.json'), 'w') as f:
        json.dump({'glibc': glibc_needed(elves + list(libs.values())), 'tests': packed}, f,
                  indent=1)
    shutil.copy2(os.path.abspath(__file__), os.path.join(out, 'hil.py'))
    shutil.copy2(os.path.join(HERE, 'suites'), os.path.join(out, 'suites'))
    shutil.copy2(os.path.join(HERE, 'README.md'), os.path.join(out, 'README.md'))
    with open(os.path.join(out, 'run'), 'w') as f:
        f.write('#!/bin/sh\n# Run the packed CUDA-agent suites and aql-bench --agent cuda'
                ' on this machine\'s driver.\n'
                'exec python3 "$(dirname "$0")/hil.py" run-pack "$(dirname "$0")"\n')
    os.chmod(os.path.join(out, 'run'), 0o755)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
    print('hil: packed %d tests, %d files, %d libraries (%s) into %s: %.1f MiB' % (
        len(packed), len(copied), len(libs), ', '.join(sorted(libs)) or 'none', out,
        size / 2**20))
    if size > PACK_LIMIT:
        # Instrumented programs carry the sanitizer's runtime each: such
        # a pack proves the packing here and is never carried to a GPU.
        if sanitized(build) != 'none':
            print('hil: over %d MiB, allowed for a %s build (carry a plain build\'s pack)'
                  % (PACK_LIMIT >> 20, sanitized(build)))
            return 0
        print('hil: the pack is over %d MiB' % (PACK_LIMIT >> 20))
        return 1
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == 'run':
        return cmd_run(argv[2])
    if len(argv) == 3 and argv[1] == 'run-amd':
        return cmd_run_amd(argv[2])
    if len(argv) == 3 and argv[1] == 'run-pack':
        return cmd_run_pack(argv[2])
    if len(argv) == 4 and argv[1] == 'pack':
        return cmd_pack(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
