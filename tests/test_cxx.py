#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The public headers and the examples as C++: with g++ and the clang++
found here, each in C++17 and C++20, compile one translation unit that
includes every public header and uses the macros that differ in C++
(AQL_TYPE, AQL_TYPE_REGISTER, AQL_BUF_DECLARE, AQL_HOST_KERNEL_DESCRIPTOR,
AQL_LDS_ADD), then build each example's host program as C++ against the
tree's include/ and libaql.so and run it with its kernel: it checks its
own result. -Wno-missing-field-initializers: C++'s -Wextra reports the
zero-filled members of a designated initializer, which C does not.
In a sanitized build only the compiler of the build's own family links
(its sanitizer runtime); the other compiles without running. aql/mpi.h
is included where --mpi-include names <mpi.h>'s folder."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HEADERS_USE = r'''
struct particle { float x, y, z, m; };
AQL_BUF_DECLARE(particle, struct particle)
struct scale_args { float *x; float k; };
static void scale(const void *kernarg)
{
	const struct scale_args *a = (const struct scale_args *)kernarg;

	a->x[aql_host_global_id(0)] *= a->k;
}
static const aql_host_kernel_descriptor scale_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(scale, struct scale_args, AQL_HOST_KD_NO_BARRIER);
extern "C" int c_linkage_check(void);
int c_linkage_check(void)
{
	aql_status (*create)(const aql_type *, uint64_t, enum aql_direction,
			     const aql_buf_config *, aql_buf **) = aql_buf_create;
	const aql_type *t;
	aql_buf_particle p;
	aql_lds_layout l;
	uint32_t off;
	aql_arg args[] = { AQL_ARG(1.0f), AQL_ARG((uint16_t)1), AQL_ARG(2ull) };

	if (AQL_TYPE(uint32_t) != &aql_type_u32 || AQL_TYPE(double) != &aql_type_f64 ||
	    args[0].type != &aql_type_f32 || args[1].type != &aql_type_u16 ||
	    args[2].type != &aql_type_u64 || scale_kd.kernarg_align != 16 || !create)
		return 2;
	if (aql_lds_layout_init_size(&l, "cxx", 0) || AQL_LDS_ADD(&l, float, 16, &off) || off)
		return 3;
	if (AQL_TYPE_REGISTER(struct particle, &t) ||
	    aql_buf_particle_create(4, AQL_IN, NULL, &p))
		return 4;
	int bad = aql_buf_particle_data(p) == NULL;

	aql_buf_destroy(p.raw);
	return bad ? 5 : 0;
}
int main(void)
{
	return c_linkage_check();
}
'''


def compilers():
    """g++, and the first clang++ found."""
    clang = [c for c in ['clang++', 'clang++-19', 'clang++-16'] if shutil.which(c)][:1]
    return (['g++'] if shutil.which('g++') else []) + clang


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, errors='replace', env=env)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--include', required=True)
    ap.add_argument('--lib', required=True, help='libaql.so')
    ap.add_argument('--cc-id', default='gcc')
    ap.add_argument('--sanitize', default='none')
    ap.add_argument('--program', action='append', default=[],
                    help='NAME:SOURCE:KERNEL[:cuda]')
    ap.add_argument('--cuda-emu-dir')
    ap.add_argument('--cuda-emu-kernels')
    ap.add_argument('--mpi-include', action='append', default=[],
                    help="<mpi.h>'s folder, for aql/mpi.h (left out without it)")
    a = ap.parse_args()

    cxx = compilers()
    if 'g++' not in cxx:
        print('SKIP: no g++')
        return 77
    include = os.path.abspath(a.include)
    lib = os.path.abspath(a.lib)
    headers = sorted(h for h in os.listdir(os.path.join(include, 'aql'))
                     if h.endswith('.h') and (h != 'mpi.h' or a.mpi_include))
    failures, checks = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        tu = os.path.join(tmp, 'headers.cc')
        with open(tu, 'w') as f:
            f.write(''.join('#include <aql/%s>\n' % h for h in headers) + HEADERS_USE)
        for c in cxx:
            native = (c == 'g++') == (a.cc_id == 'gcc')
            runs = a.sanitize == 'none' or native
            san = ['-fsanitize=' + a.sanitize] if a.sanitize != 'none' and runs else []
            for std in ['c++17', 'c++20']:
                base = [c, '-std=' + std, '-Wall', '-Wextra', '-Werror',
                        '-Wno-missing-field-initializers', '-I', include] + san
                # aql/mpi.h with the C API only: MPI's C++ bindings need their own library.
                for d in a.mpi_include:
                    base += ['-isystem', d, '-DOMPI_SKIP_MPICXX', '-DMPICH_SKIP_MPICXX']
                link = ['-x', 'none', '-Wl,-rpath,' + os.path.dirname(lib), lib]
                units = [('headers', tu, None, False)]
                for spec in a.program:
                    name, src, kernel, *kind = spec.split(':')
                    units.append((name, src, kernel, kind == ['cuda']))
                for name, src, kernel, cuda in units:
                    exe = os.path.join(tmp, '%s.%s.%s' % (name, c, std))
                    cmd = base + ['-x', 'c++', '-I', os.path.dirname(os.path.abspath(src)),
                                  os.path.abspath(src)]
                    cmd += ['-o', exe] + link if runs else ['-c', '-o', exe + '.o']
                    checks += 1
                    rc, out = run(cmd)
                    what = '%s %s -std=%s' % (name, c, std)
                    if rc:
                        failures.append('%s: does not compile\n%s' % (what, out))
                        continue
                    if not runs:
                        print('%s: compiles (not run: sanitized build of another compiler)' % what)
                        continue
                    env = dict(os.environ)
                    if cuda:
                        env['LD_LIBRARY_PATH'] = a.cuda_emu_dir
                        env['AQL_CUDA_EMU_KERNELS'] = a.cuda_emu_kernels
                    rc, out = run([exe] + ([kernel] if kernel else []), env)
                    if rc:
                        failures.append('%s: exit %d\n%s' % (what, rc, out))
                    else:
                        print('%s: ok %s' % (what, out.strip().splitlines()[-1] if out.strip() else ''))
    for f in failures:
        print('FAIL ' + f)
    print('%d checks with %s, %d failed' % (checks, ', '.join(cxx), len(failures)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
