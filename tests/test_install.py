#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The install layout: `meson install --destdir` of the build under test
into a temporary directory, then check where each piece lands and build a
program against the staged tree with `pkg-config --cflags --libs aql`.

libaql.so, libaql.a and aql.pc go to <libdir>, the headers to
<includedir>/aql/, and libhsa-runtime64.so.1 (with hsa-runtime64.pc) to
<libdir>/aql/ only: in <libdir> it would come before ROCr's in the
loader's search and replace it for every program (meson_options.txt,
hsa_system).
With --mpi, libaql-mpi.so, aql/mpi.h and aql-mpi.pc too, and a program
built and linked with `pkg-config --cflags --libs aql-mpi`."""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

PROGRAM = r'''
#include <stdio.h>
#include <aql/aql.h>

int main(void)
{
	aql_agent *agent;

	if (aql_agent_default(&agent) != AQL_OK) {
		fprintf(stderr, "%s\n", aql_error_message());
		return 1;
	}
	puts("aql linked");
	return 0;
}
'''


MPI_PROGRAM = r'''
#include <aql/mpi.h>

int main(int argc, char **argv)
{
	MPI_Datatype t;

	MPI_Init(&argc, &argv);
	aql_mpi_type(AQL_TYPE(float), &t);
	MPI_Finalize();
	return t != MPI_FLOAT;
}
'''


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--meson', required=True)
    ap.add_argument('--build', required=True)
    ap.add_argument('--prefix', required=True)
    ap.add_argument('--libdir', required=True)
    ap.add_argument('--includedir', required=True)
    ap.add_argument('--cc', required=True)
    ap.add_argument('--hsa', action='store_true', help='libhsa-runtime64 is built')
    ap.add_argument('--hsa-system', action='store_true', help='built with -Dhsa_system=true')
    ap.add_argument('--mpi', action='store_true', help='libaql-mpi is built')
    ap.add_argument('--sanitize', default='none', help="the build's b_sanitize")
    a = ap.parse_args()

    def under(d):
        return d if os.path.isabs(d) else os.path.join(a.prefix, d)

    with tempfile.TemporaryDirectory(prefix='aql-install-') as dest:
        r = subprocess.run([a.meson, 'install', '-C', a.build, '--destdir', dest,
                            '--no-rebuild', '--quiet'], capture_output=True, text=True)
        if r.returncode:
            fail('meson install: ' + r.stdout + r.stderr)
        libdir = dest + under(a.libdir)
        incdir = dest + under(a.includedir)
        for f in ('libaql.so', 'libaql.a', 'pkgconfig/aql.pc'):
            if not os.path.exists(os.path.join(libdir, f)):
                fail('%s is not in %s' % (f, libdir))
        for h in ('aql.h', 'kernel.h', 'printf.h', 'launch.h'):
            if not os.path.exists(os.path.join(incdir, 'aql', h)):
                fail('aql/%s is not in %s' % (h, incdir))
        private = os.path.join(libdir, 'aql')
        in_libdir = [f for f in os.listdir(libdir) if f.startswith('libhsa-runtime64')]
        if os.path.exists(os.path.join(libdir, 'pkgconfig', 'hsa-runtime64.pc')):
            in_libdir.append('pkgconfig/hsa-runtime64.pc')
        if a.hsa and not a.hsa_system:
            if in_libdir:
                fail('%s in the default libdir %s, ahead of ROCr' % (in_libdir, libdir))
            for f in ('libhsa-runtime64.so.1', 'pkgconfig/hsa-runtime64.pc'):
                if not os.path.exists(os.path.join(private, f)):
                    fail('%s is not in %s' % (f, private))
        elif a.hsa_system and 'libhsa-runtime64.so.1' not in in_libdir:
            fail('-Dhsa_system=true, but libhsa-runtime64.so.1 is not in ' + libdir)

        env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=dest,
                   PKG_CONFIG_PATH=os.path.join(libdir, 'pkgconfig'))
        r = subprocess.run(['pkg-config', '--cflags', '--libs', 'aql'], env=env,
                           capture_output=True, text=True)
        if r.returncode:
            fail('pkg-config --cflags --libs aql: ' + r.stderr)
        flags = r.stdout.split()
        if '-I' + incdir not in flags or '-L' + libdir not in flags:
            fail('pkg-config gives %s, not -I%s -L%s' % (flags, incdir, libdir))
        src = os.path.join(dest, 'prog.c')
        exe = os.path.join(dest, 'prog')
        with open(src, 'w') as f:
            f.write(PROGRAM)
        # A sanitized libaql needs its runtime linked first, as the tests do.
        san = [] if a.sanitize == 'none' else ['-fsanitize=' + a.sanitize]
        r = subprocess.run([a.cc, '-std=c17', src, '-o', exe] + san + flags,
                           capture_output=True, text=True)
        if r.returncode:
            fail('building a program against the staged tree: ' + r.stderr)
        r = subprocess.run([exe], env=dict(os.environ, LD_LIBRARY_PATH=libdir),
                           capture_output=True, text=True)
        if r.returncode or r.stdout != 'aql linked\n':
            fail('the program: rc %d, %r %r' % (r.returncode, r.stdout, r.stderr))
        if a.mpi:
            if not os.path.exists(os.path.join(incdir, 'aql', 'mpi.h')):
                fail('aql/mpi.h is not in ' + incdir)
            for f in ('libaql-mpi.so', 'pkgconfig/aql-mpi.pc'):
                if not os.path.exists(os.path.join(libdir, f)):
                    fail('%s is not in %s' % (f, libdir))
            r = subprocess.run(['pkg-config', '--cflags', '--libs', 'aql-mpi'], env=env,
                               capture_output=True, text=True)
            if r.returncode or '-laql-mpi' not in r.stdout.split():
                fail('pkg-config --cflags --libs aql-mpi: %s%s' % (r.stdout, r.stderr))
            mpi_flags = r.stdout.split()
            # The MPI it requires is the system's, outside the staged tree:
            # its flags without the sysroot.
            r = subprocess.run(['pkg-config', '--print-requires', 'aql-mpi'], env=env,
                               capture_output=True, text=True, check=True)
            for req in r.stdout.split():
                if req != 'aql':
                    mpi_flags += subprocess.run(['pkg-config', '--cflags', '--libs', req],
                                                capture_output=True, text=True,
                                                check=True).stdout.split()
            with open(src, 'w') as f:
                f.write(MPI_PROGRAM)
            r = subprocess.run([a.cc, '-std=c17', src, '-o', exe + '-mpi'] + san + mpi_flags,
                               capture_output=True, text=True)
            if r.returncode:
                fail('building an MPI program against the staged tree: ' + r.stderr)
        # Its RUNPATH finds libaql.so.0 one level up, with no LD_LIBRARY_PATH
        # for it. Not under sanitizers: their runtime must load first.
        if a.hsa and not a.hsa_system and a.sanitize == 'none':
            try:
                ctypes.CDLL(os.path.join(private, 'libhsa-runtime64.so.1'))
            except OSError as e:
                fail('loading the staged libhsa-runtime64.so.1: %s' % e)
    print('install layout ok')


if __name__ == '__main__':
    main()
