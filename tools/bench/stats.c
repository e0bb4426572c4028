/* SPDX-License-Identifier: MIT */
/* aql-bench: progress line, failure messages and the one summary of each kind of result. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

bool progress_on;

void progress(size_t k, size_t n, const char *name)
{
	if (progress_on)
		fprintf(stderr, "\r[%zu/%zu] %s...\033[K", k, n, name);
}

void progress_clear(void)
{
	if (progress_on)
		fputs("\r\033[K", stderr);
}

int fail_msg(const char *call, aql_status st, const char *msg)
{
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: %s: %s\n", call,
		aql_status_str(st), msg && *msg ? msg : "(no detail)");
	return -1;
}

int fail(const char *call, aql_status st)
{
	return fail_msg(call, st, aql_error_message());
}

int fail_errno(const char *call, int err)
{
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: %s\n", call, strerror(err));
	return -1;
}

/* Touch every page now so that no page fault lands between samples. */
uint64_t *alloc_samples(uint32_t n)
{
	uint64_t *s = malloc((size_t)n * sizeof(*s));

	if (s)
		memset(s, 0, (size_t)n * sizeof(*s));
	return s;
}

double rate_of(uint64_t items, uint64_t ns)
{
	return ns ? (double)items * 1e9 / (double)ns : 0.0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted samples; permille 999 is p99.9. */
static uint64_t percentile(const uint64_t *sorted, size_t n, unsigned permille)
{
	size_t rank = ((size_t)n * permille + 999) / 1000;

	return sorted[rank ? rank - 1 : 0];
}

void pair_sample(uint64_t *raw, uint64_t *typed, uint64_t *over, size_t i,
		 double r, double t)
{
	raw[i] = (uint64_t)(r + 0.5);
	typed[i] = (uint64_t)(t + 0.5);
	over[i] = t > r ? (uint64_t)(t - r + 0.5) : 0;
}

int pair_rounds(uint32_t n, uint32_t warmup, int (*round)(void *user, double *r, double *t),
		void *user, struct latency out[3])
{
	uint64_t *raw = alloc_samples(n), *typed = alloc_samples(n), *over = alloc_samples(n);
	double r = 0, t = 0;
	int rc = -1;

	if (!raw || !typed || !over) {
		rc = fail_errno("malloc", ENOMEM);
		goto out;
	}
	for (uint32_t i = 0; i < n + warmup; i++) {
		if (round(user, &r, &t))
			goto out;
		if (i >= warmup)
			pair_sample(raw, typed, over, i - warmup, r, t);
	}
	latency_stats(raw, n, &out[0]);
	latency_stats(typed, n, &out[1]);
	latency_stats(over, n, &out[2]);
	rc = 0;
out:
	free(raw);
	free(typed);
	free(over);
	return rc;
}

/* once(user) rounds + 1 times, the first a warm-up, items per call: the
 * rate per call, times scale, summed up in res under unit. */
static int timed_rounds(uint32_t rounds, uint64_t items, double scale, const char *unit,
			int (*once)(void *user), void *user, struct result *res)
{
	double *rate = calloc(rounds, sizeof(*rate));
	int rc = -1;

	if (!rate)
		return fail_errno("malloc", ENOMEM);
	for (uint32_t i = 0; i <= rounds; i++) {
		uint64_t t0 = now_ns();

		if (once(user))
			goto out;
		if (i)
			rate[i - 1] = rate_of(items, now_ns() - t0) * scale;
	}
	rate_stats(rate, rounds, 1, &res->rate);
	res->rate.unit = unit;
	res->kind = RESULT_RATE;
	rc = 0;
out:
	free(rate);
	return rc;
}

int transfer_rounds(uint32_t rounds, size_t bytes, int (*once)(void *user), void *user,
		    struct result *res)
{
	return timed_rounds(rounds, bytes, 1e-9, "GB/s", once, user, res);
}

int rate_rounds(uint32_t rounds, uint64_t items, const char *unit, int (*once)(void *user),
		void *user, struct result *res)
{
	return timed_rounds(rounds, items, 1.0, unit, once, user, res);
}

/* The one summary of every latency metric. Sorts samples in place. */
void latency_stats(uint64_t *samples, size_t n, struct latency *out)
{
	double sum = 0;
	size_t i;

	qsort(samples, n, sizeof(*samples), cmp_u64);
	for (i = 0; i < n; i++)
		sum += (double)samples[i];
	out->samples = n;
	out->min = samples[0];
	out->p50 = percentile(samples, n, 500);
	out->p99 = percentile(samples, n, 990);
	out->p999 = percentile(samples, n, 999);
	out->mean = sum / (double)n;
	for (i = 0; i < LATENCY_CDF - 2; i++)
		out->cdf[i] = percentile(samples, n, (unsigned)i * 10);
	out->cdf[LATENCY_CDF - 2] = out->p999;
	out->cdf[LATENCY_CDF - 1] = samples[n - 1];
}

double latency_cdf_p(unsigned i)
{
	if (i < LATENCY_CDF - 2)
		return i / 100.0;
	return i == LATENCY_CDF - 2 ? 0.999 : 1.0;
}

/* The one summary of every throughput metric. Sorts rates in place. */
void rate_stats(double *rates, uint32_t n, uint32_t threads,
		struct rate *out)
{
	qsort(rates, n, sizeof(*rates), cmp_double);
	out->rounds = n;
	out->threads = threads;
	out->min = rates[0];
	out->max = rates[n - 1];
	out->median = n & 1 ? rates[n / 2]
			    : (rates[n / 2 - 1] + rates[n / 2]) / 2;
}

/* Median, p90 (nearest rank), min and max of n per-round values. */
void duration_stats(double *v, uint32_t n, const char *unit,
		    uint32_t reps, uint32_t kernels, struct duration *out)
{
	size_t rank = ((size_t)n * 900 + 999) / 1000;

	qsort(v, n, sizeof(*v), cmp_double);
	out->unit = unit;
	out->rounds = n;
	out->reps = reps;
	out->kernels = kernels;
	out->min = v[0];
	out->max = v[n - 1];
	out->p90 = v[rank ? rank - 1 : 0];
	out->median = n & 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int slurp(const char *path, unsigned char **out, size_t *size)
{
	unsigned char *buf = NULL;
	struct stat stt;
	size_t done = 0;
	ssize_t n;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &stt))
		goto fail;
	if (!S_ISREG(stt.st_mode)) {
		errno = S_ISDIR(stt.st_mode) ? EISDIR : EINVAL;
		goto fail;
	}
	buf = malloc((size_t)stt.st_size + 1);
	if (!buf)
		goto fail;
	while (done < (size_t)stt.st_size) {
		n = read(fd, buf + done, (size_t)stt.st_size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	*out = buf;
	*size = done;
	return 0;
fail:
	err = errno;
	free(buf);
	close(fd);
	errno = err;
	return -1;
}

int read_fail(const char *path, int err)
{
	progress_clear();
	fprintf(stderr, "aql-bench: cannot read %s: %s\n", path, strerror(err));
	return -1;
}

bool xcpu_same(const uint64_t *ns, size_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (size_t i = 0; i < n; i++) {
		lo = ns[i] < lo ? ns[i] : lo;
		hi = ns[i] > hi ? ns[i] : hi;
	}
	return n && (hi == 0 || (lo && (double)hi <= XCPU_SAME * (double)lo));
}
