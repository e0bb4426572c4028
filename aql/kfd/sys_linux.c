/* SPDX-License-Identifier: MIT */
/*
 * The system table (sys.h): libc's calls with errno turned into -errno, or
 * the emulation named by AQL_KFD_SYS. The choice is made once per process;
 * a library that fails to load is the reason, kept, for every later call.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "aql/kfd/sys.h"
#include "util/error.h"

static int sys_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int sys_close(int fd)
{
	return close(fd) ? -errno : 0;
}

/* Not restarted here: an interrupted wait must resume with the time left,
 * which only its caller knows. */
static int sys_ioctl(int fd, unsigned long request, void *arg)
{
	int r = ioctl(fd, request, arg);

	return r < 0 ? -errno : r;
}

static void *sys_mmap(void *addr, size_t length, int prot, int flags, int fd, uint64_t offset)
{
	void *p = mmap(addr, length, prot, flags, fd, (off_t)offset);

	return p == MAP_FAILED ? (void *)(intptr_t)-errno : p;
}

static int sys_munmap(void *addr, size_t length)
{
	return munmap(addr, length) ? -errno : 0;
}

static long sys_read_file(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	int fd;

	if (size == 0)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			close(fd);
			return -err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (long)len;
}

static int sys_list_dir(const char *path, int (*each)(const char *name, void *user), void *user)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int r = 0;

	if (!d)
		return -errno;
	while (r == 0 && (errno = 0, e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r = each(e->d_name, user);
	}
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}

static const struct aql_kfd_sys linux_sys = {
	.abi = AQL_KFD_SYS_ABI,
	.name = "linux",
	.open = sys_open,
	.close = sys_close,
	.ioctl = sys_ioctl,
	.mmap = sys_mmap,
	.munmap = sys_munmap,
	.read_file = sys_read_file,
	.list_dir = sys_list_dir,
};

static pthread_once_t choose_once = PTHREAD_ONCE_INIT;
static const struct aql_kfd_sys *chosen;
static struct aql_kept_failure choose_failure;

/* Why there is no table: kept for every later call. */
#define refuse(st, ...) aql_keep_failure(&choose_failure, aql_fail(st, __VA_ARGS__))

static void choose(void)
{
	const char *path = secure_getenv("AQL_KFD_SYS");
	const struct aql_kfd_sys *t;
	void *lib;

	if (!path || !path[0]) {
		chosen = &linux_sys;
		return;
	}
	/* Kept loaded until exit: the table's functions live in it. */
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		refuse(AQL_ERR_NOT_FOUND, "the KFD emulation AQL_KFD_SYS=%s does not load: %s",
		       path, dlerror());
		return;
	}
	t = dlsym(lib, "aql_kfd_sys_v1");
	if (!t) {
		refuse(AQL_ERR_NOT_FOUND, "the KFD emulation AQL_KFD_SYS=%s has no aql_kfd_sys_v1",
		       path);
		dlclose(lib);
		return;
	}
	if (t->abi != AQL_KFD_SYS_ABI) {
		refuse(AQL_ERR_UNSUPPORTED,
		       "the KFD emulation AQL_KFD_SYS=%s has table ABI %u, and this libaql needs %u: "
		       "rebuild it with this aql", path, t->abi, AQL_KFD_SYS_ABI);
		dlclose(lib);
		return;
	}
	if (!t->name || !t->open || !t->close || !t->ioctl || !t->mmap || !t->munmap ||
	    !t->read_file || !t->list_dir) {
		refuse(AQL_ERR_UNSUPPORTED,
		       "the KFD emulation AQL_KFD_SYS=%s leaves an entry of aql_kfd_sys_v1 empty",
		       path);
		dlclose(lib);
		return;
	}
	chosen = t;
}

aql_status aql_kfd_sys_get(const struct aql_kfd_sys **out)
{
	pthread_once(&choose_once, choose);
	if (!chosen)
		return aql_fail_kept(&choose_failure, NULL);
	*out = chosen;
	return AQL_OK;
}
