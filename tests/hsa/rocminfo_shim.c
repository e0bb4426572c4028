/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD library for running Debian's rocminfo on aql's
 * libhsa-runtime64.so.1 where the machine has no amdgpu module (CI).
 *
 * Before any HSA call rocminfo checks the machine itself and exits 1
 * unless `popen("lsmod | grep amdgpu")` prints something and then either
 * open("/dev/kfd", O_RDWR) succeeds or a group check (stat of /dev/kfd,
 * getlogin_r, membership of its group) that ends in exit 1 either way.
 * This library answers just those two calls, and only when rocminfo's
 * own code makes them: the popen reads a line saying that aql's runtime
 * stands in for amdgpu, and the open gives a descriptor of /dev/null,
 * which rocminfo closes at once. The later checks are then never made.
 * Calls from any library (libaql opening /dev/kfd for its AMD agent
 * included) and every call on a machine with an amdgpu module (built in
 * or loaded: /sys/module/amdgpu) go to libc unchanged. Nothing of HSA is
 * answered here.
 */
/* rocminfo calls open, not open64: define that very symbol. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char lsmod_line[] = "amdgpu (none: aql's libhsa-runtime64 stands in)\n";

/* The address range of the main program (the first object dl_iterate_phdr
 * reports), so that only rocminfo's own calls are answered. */
static uintptr_t main_lo, main_hi;
static FILE *lsmod_stream;

static int find_main(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size, (void)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD)
			continue;
		if (!main_lo || lo < main_lo)
			main_lo = lo;
		if (hi > main_hi)
			main_hi = hi;
	}
	return 1;	/* the first object only */
}

static int answering(const void *caller)
{
	static int amdgpu = -1;

	if (amdgpu < 0) {
		amdgpu = access("/sys/module/amdgpu", F_OK) == 0;
		dl_iterate_phdr(find_main, NULL);
	}
	return !amdgpu && (uintptr_t)caller >= main_lo && (uintptr_t)caller < main_hi;
}

FILE *popen(const char *command, const char *type)
{
	FILE *(*real)(const char *, const char *) =
		(FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, "popen");

	if (answering(__builtin_return_address(0)) && !strcmp(command, "lsmod | grep amdgpu")) {
		lsmod_stream = fmemopen((void *)lsmod_line, sizeof(lsmod_line) - 1, "r");
		return lsmod_stream;
	}
	return real(command, type);
}

int pclose(FILE *stream)
{
	int (*real)(FILE *) = (int (*)(FILE *))dlsym(RTLD_NEXT, "pclose");

	if (stream && stream == lsmod_stream) {
		lsmod_stream = NULL;
		fclose(stream);
		return 0;	/* grep's exit status when it found a line */
	}
	return real(stream);
}

int open(const char *path, int flags, ...)
{
	int (*real)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (answering(__builtin_return_address(0)) && !strcmp(path, "/dev/kfd"))
		return real("/dev/null", O_RDWR | O_CLOEXEC);
	return real(path, flags, mode);
}
