/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --read FILE: loading a whole file into memory with
 * aql_file_read() (io_uring) next to a plain read() loop, in the same run,
 * into the same destination. GB/s is 1e9 bytes per second; every figure is
 * the median (with min and max) over the rounds, and each round times one
 * whole read, open() to close().
 *
 * The destination is one anonymous mapping, aligned to 2 MiB and offered
 * for transparent huge pages (MADV_HUGEPAGE; AQL_BENCH_READ_4K=1 keeps it
 * in 4 KiB pages), faulted in before the first round. It is what a pool
 * allocator's huge-page buffer would be; O_DIRECT requests into it have
 * few physical segments, which some virtual disks need to go fast. The
 * banner says how much of it got huge pages.
 *
 * read_uring_gbps, read_plain_gbps
 *	Cached: the file is in the page cache (a warm-up read of each kind
 *	comes first, and also checks that both read the same bytes).
 *	aql_file_read() with default options (io_uring, 1 MiB pieces, 16 in
 *	flight; AUTO direct I/O, which a cached file does not take: checked
 *	every round) against read(fd, dst + done, size - done) until the
 *	end. Every round runs both, which one goes first alternating, so a
 *	noisy spell of this (virtual) machine hits both alike.
 *
 * read_uring_direct_gbps, read_plain_uncached_gbps, read_uring_uncached_gbps
 *	Uncached: before every round, fdatasync() and
 *	posix_fadvise(POSIX_FADV_DONTNEED) over the whole file drop its
 *	pages from the page cache; that is all "uncached" means here (the
 *	device and the hypervisor below may still cache). The set-up checks
 *	with mincore() that the drop works on FILE. The plain peer is the
 *	same buffered read() loop on the just-dropped file (so the kernel's
 *	readahead helps it); io_uring uses aql_file_read() with default
 *	options, which reads the dropped file's aligned body with O_DIRECT
 *	(checked every round); read_uring_uncached_gbps is io_uring through
 *	the page cache (AQL_FILE_DIRECT_OFF) on the same dropped file. Every
 *	round runs the three, the first one rotating. Skipped, and said so,
 *	where FILE's file system has no O_DIRECT or the drop does not work
 *	(tmpfs).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aql/file.h>

#include "bench.h"

#define HUGE_ALIGN	(2u << 20)

enum { CACHED_URING, CACHED_PLAIN, UNC_DIRECT, UNC_PLAIN, UNC_URING, READERS };

struct read_ctx {
	const char *path;
	uint64_t size;
	size_t capacity;	/* size rounded up to 4 KiB */
	void *map;
	size_t map_size;
	uint8_t *dst;
	uint64_t huge_bytes;	/* of dst, backed by huge pages */
	enum aql_file_method method;
	bool cached_done, uncached_done;
	char uncached_why[320];	/* non-empty: the uncached figures are skipped */
	struct rate rates[READERS];
};

static struct read_ctx the_read_ctx;

static struct read_ctx *read_of(const struct ctx *ctx)
{
	return ctx->state;
}

static uint64_t checksum(const uint8_t *p, uint64_t n)
{
	uint64_t h = 0xcbf29ce484222325ull, w;
	uint64_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The plain peer: open, read() until the end, close. */
static int plain_read(const struct read_ctx *r)
{
	uint64_t done = 0;
	ssize_t n;
	int fd = open(r->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return read_fail(r->path, errno);
	while (done < r->size) {
		n = read(fd, r->dst + done, (size_t)(r->size - done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : EIO;

			close(fd);
			return read_fail(r->path, err);
		}
		done += (uint64_t)n;
	}
	close(fd);
	return 0;
}

/*
 * aql_file_read() of the whole file; want_direct says whether the run is
 * to check that O_DIRECT read the file (dropped) or nothing of it (cached).
 */
static int uring_read(struct read_ctx *r, enum aql_file_direct direct, bool want_direct)
{
	aql_file_read_options o = { .direct = direct };
	aql_file_read_result res;
	aql_status st;

	st = aql_file_read(r->path, r->dst, r->capacity, 0, &o, &res);
	if (st != AQL_OK)
		return fail("aql_file_read", st);
	if (res.bytes != r->size) {
		progress_clear();
		fprintf(stderr, "aql-bench: aql_file_read of %s read %" PRIu64 " of %" PRIu64
			" bytes\n", r->path, res.bytes, r->size);
		return -1;
	}
	/* Dropped: the aligned body, at least, must bypass the page cache. */
	if (want_direct ? res.direct_bytes + 4096 < r->size : res.direct_bytes != 0) {
		progress_clear();
		fprintf(stderr, "aql-bench: aql_file_read of the %s %s read %" PRIu64
			" of %" PRIu64 " bytes with O_DIRECT\n", want_direct ? "dropped" : "cached",
			r->path, res.direct_bytes, r->size);
		return -1;
	}
	r->method = res.method;
	return 0;
}

static int drop_cache(const struct read_ctx *r)
{
	int fd = open(r->path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return read_fail(r->path, errno);
	fdatasync(fd);
	err = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	if (err)
		return fail_errno("posix_fadvise(POSIX_FADV_DONTNEED)", err);
	return 0;
}

/* Percent of FILE in the page cache, or -1 if mincore() cannot tell. */
static double cached_percent(const struct read_ctx *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = (size_t)((r->size + page - 1) / page), resident = 0, i;
	unsigned char *vec = malloc(pages);
	void *map = MAP_FAILED;
	int fd = open(r->path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0 && vec)
		map = mmap(NULL, (size_t)r->size, PROT_READ, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (map == MAP_FAILED || mincore(map, (size_t)r->size, vec)) {
		if (map != MAP_FAILED)
			munmap(map, (size_t)r->size);
		free(vec);
		return -1;
	}
	for (i = 0; i < pages; i++)
		resident += vec[i] & 1;
	munmap(map, (size_t)r->size);
	free(vec);
	return 100.0 * (double)resident / (double)pages;
}

/* GB/s of one timed call. */
static int timed(struct read_ctx *r, int reader, double *gbps)
{
	uint64_t t0 = now_ns(), t;
	int rc;

	switch (reader) {
	case CACHED_URING:
		rc = uring_read(r, AQL_FILE_DIRECT_AUTO, false);
		break;
	case UNC_DIRECT:
		rc = uring_read(r, AQL_FILE_DIRECT_AUTO, true);
		break;
	case UNC_URING:
		rc = uring_read(r, AQL_FILE_DIRECT_OFF, false);
		break;
	default:
		rc = plain_read(r);
		break;
	}
	t = now_ns() - t0;
	*gbps = t ? (double)r->size / (double)t : 0;
	return rc;
}

/*
 * Rounds of the readers in [first, first + n), taking turns, each turn
 * starting with the next reader, dropping the file's pages before each
 * read when uncached. Results in r->rates.
 */
static int measure(struct ctx *ctx, int first, int n, bool uncached)
{
	struct read_ctx *r = read_of(ctx);
	uint32_t rounds = ctx->sz.rounds, i;
	double *v[READERS] = { NULL };
	int k, rc = -1;

	for (k = first; k < first + n; k++) {
		v[k] = calloc(rounds, sizeof(double));
		if (!v[k]) {
			fail_errno("calloc", ENOMEM);
			goto out;
		}
	}
	for (i = 0; i < rounds; i++)
		for (k = 0; k < n; k++) {
			int reader = first + (int)((i + (uint32_t)k) % (uint32_t)n);

			if (uncached && drop_cache(r))
				goto out;
			if (timed(r, reader, &v[reader][i]))
				goto out;
		}
	for (k = first; k < first + n; k++) {
		rate_stats(v[k], rounds, 1, &r->rates[k]);
		r->rates[k].unit = "GB/s";
	}
	rc = 0;
out:
	for (k = first; k < first + n; k++)
		free(v[k]);
	return rc;
}

static int report_reader(struct ctx *ctx, struct result *res, int reader)
{
	struct read_ctx *r = read_of(ctx);

	if (reader >= UNC_DIRECT && r->uncached_why[0]) {
		res->kind = RESULT_SKIPPED;
		res->skipped = r->uncached_why;
		return 0;
	}
	if (reader < UNC_DIRECT && !r->cached_done) {
		if (measure(ctx, CACHED_URING, 2, false))
			return -1;
		r->cached_done = true;
	}
	if (reader >= UNC_DIRECT && !r->uncached_done) {
		if (measure(ctx, UNC_DIRECT, 3, true))
			return -1;
		r->uncached_done = true;
	}
	res->kind = RESULT_RATE;
	res->rate = r->rates[reader];
	return 0;
}

static int bench_uring(struct ctx *ctx, struct result *res)
{
	return report_reader(ctx, res, CACHED_URING);
}

static int bench_plain(struct ctx *ctx, struct result *res)
{
	return report_reader(ctx, res, CACHED_PLAIN);
}

static int bench_direct(struct ctx *ctx, struct result *res)
{
	return report_reader(ctx, res, UNC_DIRECT);
}

static int bench_plain_uncached(struct ctx *ctx, struct result *res)
{
	return report_reader(ctx, res, UNC_PLAIN);
}

static int bench_uring_uncached(struct ctx *ctx, struct result *res)
{
	return report_reader(ctx, res, UNC_URING);
}

/* Huge-page bytes of the mapping, from /proc/self/smaps; 0 if unknown. */
static uint64_t huge_bytes(const void *map)
{
	char line[256];
	unsigned long lo, hi, kb;
	bool in = false;
	uint64_t out = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)map >= lo && (uintptr_t)map < hi;
		else if (in && sscanf(line, "AnonHugePages: %lu kB", &kb) == 1)
			out = (uint64_t)kb << 10;
	}
	fclose(f);
	return out;
}

/*
 * Map and fault in the destination, read FILE both ways once (warm-up and
 * cross-check), and find out whether the uncached figures can be had.
 */
static int read_setup(struct ctx *ctx)
{
	struct read_ctx *r = &the_read_ctx;
	const char *small = getenv("AQL_BENCH_READ_4K");
	uint64_t h1, h2;
	struct stat st;
	double pct;
	int fd;

	ctx->state = r;
	r->path = ctx->opts->path;
	if (stat(r->path, &st))
		return read_fail(r->path, errno);
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		fprintf(stderr, "aql-bench: %s is not a non-empty regular file\n", r->path);
		return -1;
	}
	r->size = (uint64_t)st.st_size;
	if (r->size > SIZE_MAX - 2 * HUGE_ALIGN)
		return read_fail(r->path, EFBIG);
	r->capacity = (size_t)((r->size + 4095) & ~4095ull);
	r->map_size = r->capacity + HUGE_ALIGN;
	r->map = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		return fail_errno("mmap of the destination", errno);
	}
	r->dst = (uint8_t *)(((uintptr_t)r->map + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
	if (!(small && *small && strcmp(small, "0")))
		madvise(r->dst, r->capacity, MADV_HUGEPAGE);
	memset(r->map, 0, r->map_size);
	r->huge_bytes = huge_bytes(r->dst);

	if (plain_read(r))
		return -1;
	h1 = checksum(r->dst, r->size);
	memset(r->dst, 0, r->capacity);
	if (uring_read(r, AQL_FILE_DIRECT_AUTO, false))
		return -1;
	h2 = checksum(r->dst, r->size);
	if (h1 != h2) {
		fprintf(stderr, "aql-bench: aql_file_read and read() disagree on %s\n", r->path);
		return -1;
	}

	fd = open(r->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		snprintf(r->uncached_why, sizeof(r->uncached_why),
			 "%s: no O_DIRECT on its file system (%s), uncached peers skipped",
			 r->path, strerror(errno));
		return 0;
	}
	close(fd);
	if (drop_cache(r))
		return -1;
	pct = cached_percent(r);
	if (pct < 0 || pct > 10)
		snprintf(r->uncached_why, sizeof(r->uncached_why),
			 "%s: %s after POSIX_FADV_DONTNEED, uncached peers skipped", r->path,
			 pct < 0 ? "mincore() cannot tell what stays cached"
				 : "most of it stays cached");
	/* Back in the page cache for the cached rounds. */
	return plain_read(r);
}

static void read_cleanup(struct ctx *ctx)
{
	struct read_ctx *r = read_of(ctx);

	if (r->map)
		munmap(r->map, r->map_size);
	r->map = NULL;
}

static int read_banner(const struct ctx *ctx)
{
	const struct read_ctx *r = read_of(ctx);

	printf("aql-bench --read %s: %" PRIu64 " bytes (%.1f MiB), %u rounds, %s run\n",
	       r->path, r->size, (double)r->size / 1048576.0, ctx->sz.rounds,
	       ctx->opts->quick ? "quick" : "full");
	printf("reads with %s; destination %.0f%% in huge pages\n",
	       r->method == AQL_FILE_METHOD_URING ? "io_uring"
						  : "pread (no io_uring, or AQL_FILE_NO_URING set)",
	       100.0 * (double)r->huge_bytes / (double)r->capacity);
	if (r->uncached_why[0])
		printf("%s\n", r->uncached_why);
	putchar('\n');
	return 0;
}

static const struct bench read_benches[] = {
	{ "read_uring_gbps",		bench_uring },
	{ "read_plain_gbps",		bench_plain },
	{ "read_uring_direct_gbps",	bench_direct },
	{ "read_plain_uncached_gbps",	bench_plain_uncached },
	{ "read_uring_uncached_gbps",	bench_uring_uncached },
};

static const struct goal read_goals[] = {
	{ "ratio_read_uring_over_plain",
	  "io_uring / read(), cached",
	  "read_uring_gbps", "read_plain_gbps", true, 1.0, NULL },
	{ "ratio_read_direct_over_plain_uncached",
	  "io_uring O_DIRECT / read(), uncached",
	  "read_uring_direct_gbps", "read_plain_uncached_gbps", true, 1.5, NULL },
};

const struct mode bench_mode_read = {
	.name = "read",
	.benches = read_benches,
	.nbenches = ARRAY_SIZE(read_benches),
	.goals = read_goals,
	.ngoals = ARRAY_SIZE(read_goals),
	.setup = read_setup,
	.cleanup = read_cleanup,
	.banner = read_banner,
};
