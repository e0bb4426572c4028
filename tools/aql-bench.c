/* SPDX-License-Identifier: MIT */
/*
 * aql-bench: dispatch microbenchmarks for libaql, with machine baselines
 * measured in the same run so that the numbers can be judged against what
 * this machine can do at all.
 *
 * All work runs on the default agent (aql_agent_default()) with an empty
 * host kernel: a 1-D dispatch of one work-item whose function returns at
 * once, so every number is runtime overhead.
 *
 * dispatch_rtt_spin, dispatch_rtt_block
 *	Round trip of one dispatch on a SINGLE queue (one producer, so
 *	the cheapest reserve path). Per iteration: reset the completion
 *	signal to 1, take a CLOCK_MONOTONIC timestamp, submit the packet,
 *	wait for the signal to drop below 1 (AQL_WAIT_ACTIVE resp.
 *	AQL_WAIT_BLOCKED), take a timestamp. Warm-up iterations are not
 *	recorded. Reported as p50/p99/p99.9/min/mean in ns.
 *
 * dispatch_rtt_block_parked
 *	As dispatch_rtt_block, on a private agent whose packet processor
 *	parks at once when idle: every round trip then takes two futex
 *	wake-ups (processor, waiter), as baseline_futex_rtt does.
 *
 * dispatch_throughput, dispatch_throughput_barrier
 *	One thread submits N empty dispatches back to back on a SINGLE
 *	queue, barrier bit off resp. on. Only the last packet carries a
 *	completion signal; it also sets the barrier bit so that its
 *	completion implies that every earlier packet has finished too.
 *	Repeated for R rounds (after one warm-up round); reported as the
 *	median, min and max of dispatches/s over the rounds.
 *
 * dispatch_throughput_mp
 *	T threads share one MULTI queue and submit N/T packets each, all
 *	released by one pthread barrier. Each thread's last packet carries
 *	that thread's completion signal. Timed from the barrier release
 *	(the earliest post-barrier timestamp) until every signal completed.
 *
 * baseline_pingpong_rtt
 *	Two threads bounce a counter through one cache line, spinning:
 *	A stores i, B waits for i and answers -i, A waits for -i. Timed
 *	per round trip with the same clock_gettime() method as above.
 *
 * baseline_futex_rtt
 *	The same ping-pong, but each side sleeps in FUTEX_WAIT_PRIVATE and
 *	the other wakes it with FUTEX_WAKE_PRIVATE; no spinning at all.
 *
 * The goals printed at the end are reported, never enforced: the exit
 * status only says whether every run succeeded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <aql/aql.h>

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

#define QUEUE_SIZE		4096u
#define FULL_TIMEOUT_NS		(10ull * 1000000000ull)
#define WAIT_TIMEOUT_NS		(10ull * 1000000000ull)
#define DEFAULT_THREADS		8u
#define MAX_THREADS		1024u
#define MAX_BENCHES		16

/* Iteration counts; --quick divides them by about ten. */
struct sizes {
	uint32_t warmup;
	uint32_t spin_samples;
	uint32_t block_samples;
	uint32_t packets;	/* per throughput round, all threads together */
	uint32_t rounds;
};

static const struct sizes full_sizes = {
	.warmup = 2000,
	.spin_samples = 50000,
	.block_samples = 20000,
	.packets = 200000,
	.rounds = 9,
};

static const struct sizes quick_sizes = {
	.warmup = 200,
	.spin_samples = 5000,
	.block_samples = 2000,
	.packets = 20000,
	.rounds = 5,
};

struct opts {
	bool json;
	bool quick;
	uint32_t threads;
};

enum result_kind {
	RESULT_NONE,
	RESULT_LATENCY,
	RESULT_RATE,
};

struct latency {
	uint64_t min, p50, p99, p999;
	double mean;
	size_t samples;
};

struct rate {
	double median, min, max;
	uint32_t rounds;
	uint32_t threads;
};

struct result {
	const char *metric;
	enum result_kind kind;
	union {
		struct latency lat;
		struct rate rate;
	};
};

struct ctx {
	const struct opts *opts;
	struct sizes sz;
	aql_agent *agent;
	uint32_t queue_size;
	struct result results[MAX_BENCHES];
	size_t nresults;
};

typedef int (*bench_fn)(struct ctx *ctx, struct result *res);

struct bench {
	const char *metric;
	bench_fn run;
};

/* A goal: num's headline value, divided by den's unless den is NULL. */
struct goal {
	const char *metric;
	const char *label;
	const char *num;
	const char *den;
	bool at_least;
	double goal;
};

/*
 * A mode is a list of benchmarks run in order plus the goals judged on
 * their results. Future modes (--load, --read, --channel) add entries.
 */
struct mode {
	const char *name;
	const struct bench *benches;
	size_t nbenches;
	const struct goal *goals;
	size_t ngoals;
};

/* ---- small helpers ---------------------------------------------------- */

static bool progress_on;

static void progress(size_t k, size_t n, const char *name)
{
	if (progress_on)
		fprintf(stderr, "\r[%zu/%zu] %s...\033[K", k, n, name);
}

static void progress_clear(void)
{
	if (progress_on)
		fputs("\r\033[K", stderr);
}

static int fail_msg(const char *call, aql_status st, const char *msg)
{
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: %s: %s\n", call,
		aql_status_str(st), msg && *msg ? msg : "(no detail)");
	return -1;
}

/* aql_error_message() is per thread: call this on the failing thread. */
static int fail(const char *call, aql_status st)
{
	return fail_msg(call, st, aql_error_message());
}

static int fail_errno(const char *call, int err)
{
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: %s\n", call, strerror(err));
	return -1;
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Touch every page now so that no page fault lands between samples. */
static uint64_t *alloc_samples(uint32_t n)
{
	uint64_t *s = malloc((size_t)n * sizeof(*s));

	if (s)
		memset(s, 0, (size_t)n * sizeof(*s));
	return s;
}

static double rate_of(uint64_t items, uint64_t ns)
{
	return ns ? (double)items * 1e9 / (double)ns : 0.0;
}

/* ---- statistics --------------------------------------------------------- */

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

/* The one summary of every latency metric. Sorts samples in place. */
static void latency_stats(uint64_t *samples, size_t n, struct latency *out)
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
}

/* The one summary of every throughput metric. Sorts rates in place. */
static void rate_stats(double *rates, uint32_t n, uint32_t threads,
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

/* ---- the empty kernel ------------------------------------------------- */

struct empty_kernarg {
	uint64_t pad;
};

static void empty_kernel(const void *kernarg)
{
	(void)kernarg;
}

static const aql_host_kernel_descriptor empty_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(empty_kernel, struct empty_kernarg,
				   AQL_HOST_KD_NO_BARRIER);

static _Alignas(16) struct empty_kernarg empty_args;

static aql_packet empty_dispatch(int barrier, aql_signal *completion)
{
	aql_packet p;
	aql_dispatch_packet *d = &p.dispatch;

	memset(&p, 0, sizeof(p));
	d->header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, barrier,
				      AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	d->setup = 1;
	d->workgroup_size_x = 1;
	d->workgroup_size_y = 1;
	d->workgroup_size_z = 1;
	d->grid_size_x = 1;
	d->grid_size_y = 1;
	d->grid_size_z = 1;
	d->kernel_object = (uint64_t)(uintptr_t)&empty_kd;
	d->kernarg_address = (uint64_t)(uintptr_t)&empty_args;
	d->completion_signal = completion ? aql_signal_handle(completion) : 0;
	return p;
}

/* ---- queue plumbing ----------------------------------------------------- */

static int queue_open(struct ctx *ctx, aql_agent *agent, enum aql_queue_type type,
		      aql_queue **q)
{
	aql_queue_config cfg = {
		.size = ctx->queue_size,
		.type = type,
		.full_timeout_ns = FULL_TIMEOUT_NS,
	};
	aql_status st = aql_queue_create(agent, &cfg, q);

	return st == AQL_OK ? 0 : fail("aql_queue_create", st);
}

static int queue_close(aql_queue *q)
{
	aql_status st = aql_queue_destroy(q);

	return st == AQL_OK ? 0 : fail("aql_queue_destroy", st);
}

static int signals_create(aql_signal **sigs, uint32_t n)
{
	uint32_t i;
	aql_status st;

	for (i = 0; i < n; i++) {
		st = aql_signal_create(1, &sigs[i]);
		if (st != AQL_OK)
			return fail("aql_signal_create", st);
	}
	return 0;
}

static void signals_destroy(aql_signal **sigs, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n && sigs; i++)
		aql_signal_destroy(sigs[i]);
}

/*
 * A timed-out wait means the queue stopped, or a packet was never picked
 * up (read < write) or never signalled (read == write): say which.
 */
static int await_done(aql_queue *q, aql_signal *sig, enum aql_wait_hint hint)
{
	const char *why = NULL;
	aql_status st;
	int rc;

	st = aql_signal_wait(sig, AQL_COND_LT, 1, WAIT_TIMEOUT_NS, hint, NULL);
	if (st == AQL_OK)
		return 0;
	rc = fail("aql_signal_wait", st);
	if (aql_queue_error(q, &why) != AQL_OK && why)
		fprintf(stderr, "aql-bench: queue stopped: %s\n", why);
	fprintf(stderr, "aql-bench: queue %" PRIu64 ": write index %" PRIu64
		", read index %" PRIu64 "\n", q->amd->hsa.id,
		__atomic_load_n(&q->amd->write_dispatch_id, __ATOMIC_RELAXED),
		__atomic_load_n(&q->amd->read_dispatch_id, __ATOMIC_RELAXED));
	return rc;
}

/*
 * n packets; only the last one signals. It also sets the barrier bit, so
 * its completion means every packet before it has completed as well.
 */
static aql_status submit_batch(aql_queue *q, int barrier, aql_signal *done,
			       uint32_t n)
{
	const aql_packet body = empty_dispatch(barrier, NULL);
	const aql_packet last = empty_dispatch(1, done);
	aql_status st;
	uint32_t i;

	for (i = 1; i < n; i++) {
		st = aql_queue_submit(q, &body);
		if (st != AQL_OK)
			return st;
	}
	return aql_queue_submit(q, &last);
}

/* ---- (a) dispatch round trip ------------------------------------------ */

/* samples NULL: warm-up, nothing recorded. */
static int rtt_loop(aql_queue *q, aql_signal *sig, enum aql_wait_hint hint,
		    uint64_t *samples, uint32_t n)
{
	const aql_packet pkt = empty_dispatch(0, sig);
	aql_status st;
	uint64_t t0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		aql_signal_store(sig, 1, AQL_RELAXED);
		t0 = now_ns();
		st = aql_queue_submit(q, &pkt);
		if (st != AQL_OK)
			return fail("aql_queue_submit", st);
		if (await_done(q, sig, hint))
			return -1;
		if (samples)
			samples[i] = now_ns() - t0;
	}
	return 0;
}

static int bench_rtt(struct ctx *ctx, struct result *res, aql_agent *agent,
		     enum aql_wait_hint hint, uint32_t n)
{
	aql_queue *q = NULL;
	aql_signal *sig = NULL;
	uint64_t *samples = alloc_samples(n);
	int rc = -1;

	if (!samples)
		return fail_errno("malloc", ENOMEM);
	if (queue_open(ctx, agent, AQL_QUEUE_SINGLE, &q) ||
	    signals_create(&sig, 1))
		goto out;
	if (rtt_loop(q, sig, hint, NULL, ctx->sz.warmup) ||
	    rtt_loop(q, sig, hint, samples, n))
		goto out;
	res->kind = RESULT_LATENCY;
	latency_stats(samples, n, &res->lat);
	rc = 0;
out:
	if (q && queue_close(q))
		rc = -1;
	aql_signal_destroy(sig);
	free(samples);
	return rc;
}

static int bench_rtt_spin(struct ctx *ctx, struct result *res)
{
	return bench_rtt(ctx, res, ctx->agent, AQL_WAIT_ACTIVE, ctx->sz.spin_samples);
}

static int bench_rtt_block(struct ctx *ctx, struct result *res)
{
	return bench_rtt(ctx, res, ctx->agent, AQL_WAIT_BLOCKED, ctx->sz.block_samples);
}

/*
 * Both sides asleep: a private agent whose processor parks after 1 ns of
 * polling, so every packet wakes it through the doorbell futex and every
 * completion wakes the waiter. Two wake-ups per round trip, like
 * baseline_futex_rtt, whereas in dispatch_rtt_block the empty dispatch
 * usually completes before the waiter has gone to sleep.
 */
static int bench_rtt_block_parked(struct ctx *ctx, struct result *res)
{
	aql_host_agent_config cfg = { .workers = 1, .idle_spin_ns = 1 };
	aql_agent *agent;
	aql_status st = aql_host_agent_create(&cfg, &agent);
	int rc;

	if (st != AQL_OK)
		return fail("aql_host_agent_create", st);
	rc = bench_rtt(ctx, res, agent, AQL_WAIT_BLOCKED, ctx->sz.block_samples);
	st = aql_agent_destroy(agent);
	return st == AQL_OK ? rc : fail("aql_agent_destroy", st);
}

/* ---- (b) dispatch throughput ------------------------------------------ */

struct tput;

struct mp_worker {
	pthread_t tid;
	struct tput *t;
	aql_signal *sig;
	uint32_t packets;
	uint64_t start_ns;
	aql_status st;
	char msg[256];
};

struct tput {
	aql_queue *q;
	uint32_t packets;
	uint32_t threads;
	int barrier;
	aql_signal **sigs;		/* one per thread */
	struct mp_worker *workers;	/* MULTI only */
	pthread_barrier_t start;
};

typedef int (*round_fn)(struct tput *t, double *rate);

/* The waiter is idle while packets drain: let it sleep after a short spin. */
#define TPUT_WAIT_HINT	AQL_WAIT_SPIN_BLOCK

static int tput_round_single(struct tput *t, double *rate)
{
	aql_signal *sig = t->sigs[0];
	aql_status st;
	uint64_t t0;

	aql_signal_store(sig, 1, AQL_RELAXED);
	t0 = now_ns();
	st = submit_batch(t->q, t->barrier, sig, t->packets);
	if (st != AQL_OK)
		return fail("aql_queue_submit", st);
	if (await_done(t->q, sig, TPUT_WAIT_HINT))
		return -1;
	*rate = rate_of(t->packets, now_ns() - t0);
	return 0;
}

static void *mp_submitter(void *arg)
{
	struct mp_worker *w = arg;

	pthread_barrier_wait(&w->t->start);
	w->start_ns = now_ns();
	w->st = submit_batch(w->t->q, w->t->barrier, w->sig, w->packets);
	if (w->st != AQL_OK)
		snprintf(w->msg, sizeof(w->msg), "%s", aql_error_message());
	return NULL;
}

/* Threads parked on the start barrier could never be released: give up. */
static void die_on(int err, const char *call)
{
	if (err) {
		fail_errno(call, err);
		exit(EXIT_FAILURE);
	}
}

static uint64_t mp_run_threads(struct tput *t)
{
	uint64_t t0 = UINT64_MAX;
	uint32_t i;

	die_on(pthread_barrier_init(&t->start, NULL, t->threads),
	       "pthread_barrier_init");
	for (i = 0; i < t->threads; i++) {
		struct mp_worker *w = &t->workers[i];

		memset(w, 0, sizeof(*w));
		w->t = t;
		w->sig = t->sigs[i];
		w->packets = t->packets / t->threads;
		aql_signal_store(w->sig, 1, AQL_RELAXED);
		die_on(pthread_create(&w->tid, NULL, mp_submitter, w),
		       "pthread_create");
	}
	for (i = 0; i < t->threads; i++) {
		pthread_join(t->workers[i].tid, NULL);
		if (t->workers[i].start_ns < t0)
			t0 = t->workers[i].start_ns;
	}
	pthread_barrier_destroy(&t->start);
	return t0;
}

static int tput_round_mp(struct tput *t, double *rate)
{
	uint64_t t0 = mp_run_threads(t);
	uint32_t i;

	for (i = 0; i < t->threads; i++)
		if (t->workers[i].st != AQL_OK)
			return fail_msg("aql_queue_submit", t->workers[i].st,
					t->workers[i].msg);
	for (i = 0; i < t->threads; i++)
		if (await_done(t->q, t->sigs[i], TPUT_WAIT_HINT))
			return -1;
	*rate = rate_of((uint64_t)t->workers[0].packets * t->threads,
			now_ns() - t0);
	return 0;
}

/* One discarded warm-up round, then the measured ones. */
static int tput_rounds(struct ctx *ctx, struct tput *t, round_fn round,
		       struct result *res)
{
	uint32_t n = ctx->sz.rounds, i;
	double *rates = calloc(n, sizeof(*rates));
	double warm;
	int rc = -1;

	if (!rates)
		return fail_errno("calloc", ENOMEM);
	if (round(t, &warm))
		goto out;
	for (i = 0; i < n; i++)
		if (round(t, &rates[i]))
			goto out;
	res->kind = RESULT_RATE;
	rate_stats(rates, n, t->threads, &res->rate);
	rc = 0;
out:
	free(rates);
	return rc;
}

static int bench_tput_run(struct ctx *ctx, struct result *res,
			  enum aql_queue_type type, uint32_t threads,
			  int barrier)
{
	struct tput t = {
		.packets = ctx->sz.packets,
		.threads = threads,
		.barrier = barrier,
	};
	round_fn round = type == AQL_QUEUE_SINGLE ? tput_round_single
						  : tput_round_mp;
	int rc = -1;

	if (t.packets < threads)
		t.packets = threads;
	t.sigs = calloc(threads, sizeof(*t.sigs));
	t.workers = calloc(threads, sizeof(*t.workers));
	if (!t.sigs || !t.workers) {
		rc = fail_errno("calloc", ENOMEM);
		goto out;
	}
	if (queue_open(ctx, ctx->agent, type, &t.q) || signals_create(t.sigs, threads))
		goto out;
	rc = tput_rounds(ctx, &t, round, res);
out:
	if (t.q && queue_close(t.q))
		rc = -1;
	signals_destroy(t.sigs, threads);
	free(t.sigs);
	free(t.workers);
	return rc;
}

static int bench_tput(struct ctx *ctx, struct result *res)
{
	return bench_tput_run(ctx, res, AQL_QUEUE_SINGLE, 1, 0);
}

static int bench_tput_barrier(struct ctx *ctx, struct result *res)
{
	return bench_tput_run(ctx, res, AQL_QUEUE_SINGLE, 1, 1);
}

static int bench_tput_mp(struct ctx *ctx, struct result *res)
{
	return bench_tput_run(ctx, res, AQL_QUEUE_MULTI, ctx->opts->threads, 0);
}

/* ---- (c) machine baselines -------------------------------------------- */

/* word sits alone in its line; the read-only fields live in the next one. */
struct pingpong {
	int32_t word __attribute__((aligned(64)));
	bool futex __attribute__((aligned(64)));
	uint32_t iters;
};

static void futex_wait(int32_t *addr, int32_t val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(int32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void pp_post(struct pingpong *pp, int32_t v)
{
	__atomic_store_n(&pp->word, v, __ATOMIC_RELEASE);
	if (pp->futex)
		futex_wake(&pp->word);
}

/* FUTEX_WAIT returns at once if the word already moved on from v. */
static inline void pp_await(struct pingpong *pp, int32_t want)
{
	int32_t v;

	while ((v = __atomic_load_n(&pp->word, __ATOMIC_ACQUIRE)) != want) {
		if (pp->futex)
			futex_wait(&pp->word, v);
		else
			cpu_relax();
	}
}

/* Thread B: answer every i with -i. */
static void *pp_echo(void *arg)
{
	struct pingpong *pp = arg;
	int32_t i;

	for (i = 1; i <= (int32_t)pp->iters; i++) {
		pp_await(pp, i);
		pp_post(pp, -i);
	}
	return NULL;
}

/* Thread A: the first warmup round trips are not recorded. */
static void pp_serve(struct pingpong *pp, uint32_t warmup, uint64_t *samples)
{
	uint64_t t0;
	int32_t i;

	for (i = 1; i <= (int32_t)pp->iters; i++) {
		t0 = now_ns();
		pp_post(pp, i);
		pp_await(pp, -i);
		if ((uint32_t)i > warmup)
			samples[(uint32_t)i - 1 - warmup] = now_ns() - t0;
	}
}

static int bench_pingpong(struct ctx *ctx, struct result *res, bool futex,
			  uint32_t n)
{
	struct pingpong pp = {
		.word = 0,
		.futex = futex,
		.iters = ctx->sz.warmup + n,
	};
	uint64_t *samples = alloc_samples(n);
	pthread_t tid;
	int err;

	if (!samples)
		return fail_errno("malloc", ENOMEM);
	err = pthread_create(&tid, NULL, pp_echo, &pp);
	if (err) {
		free(samples);
		return fail_errno("pthread_create", err);
	}
	pp_serve(&pp, ctx->sz.warmup, samples);
	pthread_join(tid, NULL);
	res->kind = RESULT_LATENCY;
	latency_stats(samples, n, &res->lat);
	free(samples);
	return 0;
}

static int bench_pingpong_spin(struct ctx *ctx, struct result *res)
{
	return bench_pingpong(ctx, res, false, ctx->sz.spin_samples);
}

static int bench_pingpong_futex(struct ctx *ctx, struct result *res)
{
	return bench_pingpong(ctx, res, true, ctx->sz.block_samples);
}

/* ---- modes -------------------------------------------------------------- */

/* Each baseline runs right before the metric compared with it, so both
 * see the same placement of threads on (virtual) CPUs. */
static const struct bench dispatch_benches[] = {
	{ "baseline_pingpong_rtt",	 bench_pingpong_spin },
	{ "dispatch_rtt_spin",		 bench_rtt_spin },
	{ "baseline_futex_rtt",		 bench_pingpong_futex },
	{ "dispatch_rtt_block",		 bench_rtt_block },
	{ "dispatch_rtt_block_parked",	 bench_rtt_block_parked },
	{ "dispatch_throughput",	 bench_tput },
	{ "dispatch_throughput_barrier", bench_tput_barrier },
	{ "dispatch_throughput_mp",	 bench_tput_mp },
};

_Static_assert(ARRAY_SIZE(dispatch_benches) <= MAX_BENCHES,
	       "struct ctx holds MAX_BENCHES results");

static const struct goal dispatch_goals[] = {
	{ "ratio_dispatch_rtt_spin_vs_pingpong",
	  "dispatch_rtt_spin p50 / baseline_pingpong_rtt p50",
	  "dispatch_rtt_spin", "baseline_pingpong_rtt", false, 2.0 },
	{ "ratio_dispatch_rtt_block_vs_futex",
	  "dispatch_rtt_block p50 / baseline_futex_rtt p50",
	  "dispatch_rtt_block", "baseline_futex_rtt", false, 1.3 },
	{ "ratio_dispatch_rtt_block_parked_vs_futex",
	  "dispatch_rtt_block_parked p50 / baseline_futex_rtt p50",
	  "dispatch_rtt_block_parked", "baseline_futex_rtt", false, 1.3 },
	{ "ratio_dispatch_throughput_mp_vs_single",
	  "dispatch_throughput_mp / dispatch_throughput",
	  "dispatch_throughput_mp", "dispatch_throughput", true, 0.30 },
	{ "goal_dispatch_throughput",
	  "dispatch_throughput (dispatches/s)",
	  "dispatch_throughput", NULL, true, 4e6 },
};

static const struct mode modes[] = {
	{
		.name = "dispatch",
		.benches = dispatch_benches,
		.nbenches = ARRAY_SIZE(dispatch_benches),
		.goals = dispatch_goals,
		.ngoals = ARRAY_SIZE(dispatch_goals),
	},
};

/* ---- reporting ---------------------------------------------------------- */

static const struct result *find_result(const struct ctx *ctx,
					const char *metric)
{
	size_t i;

	for (i = 0; i < ctx->nresults; i++)
		if (!strcmp(ctx->results[i].metric, metric))
			return &ctx->results[i];
	return NULL;
}

/* The number a goal compares: p50 of a latency, median of a rate. */
static double headline(const struct result *r)
{
	if (r->kind == RESULT_LATENCY)
		return (double)r->lat.p50;
	if (r->kind == RESULT_RATE)
		return r->rate.median;
	return 0;
}

static bool goal_value(const struct ctx *ctx, const struct goal *g,
		       double *value)
{
	const struct result *num = find_result(ctx, g->num);
	const struct result *den = g->den ? find_result(ctx, g->den) : NULL;

	if (!num || (g->den && (!den || headline(den) == 0)))
		return false;
	*value = headline(num) / (den ? headline(den) : 1.0);
	return true;
}

static bool goal_met(const struct goal *g, double value)
{
	return g->at_least ? value >= g->goal : value <= g->goal;
}

static const char *fmt_rate(char *buf, size_t len, double v)
{
	if (v >= 1e6)
		snprintf(buf, len, "%.3fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.3g", v);
	return buf;
}

static void json_result(const struct result *r)
{
	if (r->kind == RESULT_LATENCY)
		printf("{\"metric\":\"%s\",\"unit\":\"ns\",\"p50\":%" PRIu64
		       ",\"p99\":%" PRIu64 ",\"p999\":%" PRIu64
		       ",\"min\":%" PRIu64 ",\"mean\":%.1f,\"samples\":%zu}\n",
		       r->metric, r->lat.p50, r->lat.p99, r->lat.p999,
		       r->lat.min, r->lat.mean, r->lat.samples);
	else if (r->kind == RESULT_RATE)
		printf("{\"metric\":\"%s\",\"unit\":\"dispatches/s\","
		       "\"value\":%.1f,\"p50\":%.1f,\"min\":%.1f,\"max\":%.1f,"
		       "\"rounds\":%" PRIu32 ",\"threads\":%" PRIu32 "}\n",
		       r->metric, r->rate.median, r->rate.median, r->rate.min,
		       r->rate.max, r->rate.rounds, r->rate.threads);
}

static void json_goal(const struct ctx *ctx, const struct goal *g)
{
	double v;

	if (!goal_value(ctx, g, &v))
		return;
	printf("{\"metric\":\"%s\",%s\"value\":%.4f,\"goal\":%g,"
	       "\"cmp\":\"%s\",\"met\":%s}\n", g->metric,
	       g->den ? "" : "\"unit\":\"dispatches/s\",", v, g->goal,
	       g->at_least ? ">=" : "<=", goal_met(g, v) ? "true" : "false");
}

static void print_json(const struct ctx *ctx, const struct mode *m)
{
	size_t i;

	for (i = 0; i < ctx->nresults; i++)
		json_result(&ctx->results[i]);
	for (i = 0; i < m->ngoals; i++)
		json_goal(ctx, &m->goals[i]);
}

static void table_latency(const struct ctx *ctx)
{
	const struct result *r;
	size_t i;

	printf("%-30s %9s %9s %9s %9s %11s %8s\n", "latency (ns)", "p50",
	       "p99", "p99.9", "min", "mean", "samples");
	for (i = 0; i < ctx->nresults; i++) {
		r = &ctx->results[i];
		if (r->kind != RESULT_LATENCY)
			continue;
		printf("  %-28s %9" PRIu64 " %9" PRIu64 " %9" PRIu64
		       " %9" PRIu64 " %11.1f %8zu\n", r->metric, r->lat.p50,
		       r->lat.p99, r->lat.p999, r->lat.min, r->lat.mean,
		       r->lat.samples);
	}
}

static void table_rate(const struct ctx *ctx)
{
	const struct result *r;
	char a[32], b[32], c[32];
	size_t i;

	printf("%-30s %9s %9s %9s %6s %7s\n", "throughput (dispatches/s)",
	       "median", "min", "max", "rounds", "threads");
	for (i = 0; i < ctx->nresults; i++) {
		r = &ctx->results[i];
		if (r->kind != RESULT_RATE)
			continue;
		printf("  %-28s %9s %9s %9s %6" PRIu32 " %7" PRIu32 "\n",
		       r->metric, fmt_rate(a, sizeof(a), r->rate.median),
		       fmt_rate(b, sizeof(b), r->rate.min),
		       fmt_rate(c, sizeof(c), r->rate.max), r->rate.rounds,
		       r->rate.threads);
	}
}

static void table_goals(const struct ctx *ctx, const struct mode *m)
{
	const struct goal *g;
	char v[32], gv[32];
	double value;
	size_t i;

	printf("%-52s %9s %11s\n", "goals (reported, not enforced)", "value",
	       "goal");
	for (i = 0; i < m->ngoals; i++) {
		g = &m->goals[i];
		if (!goal_value(ctx, g, &value))
			continue;
		if (g->den) {
			snprintf(v, sizeof(v), "%.3f", value);
			snprintf(gv, sizeof(gv), "%.2f", g->goal);
		} else {
			fmt_rate(v, sizeof(v), value);
			fmt_rate(gv, sizeof(gv), g->goal);
		}
		printf("  %-50s %9s %2s %8s  %s\n", g->label, v,
		       g->at_least ? ">=" : "<=", gv,
		       goal_met(g, value) ? "ok" : "MISSED");
	}
}

static void print_table(const struct ctx *ctx, const struct mode *m)
{
	table_latency(ctx);
	putchar('\n');
	table_rate(ctx);
	putchar('\n');
	table_goals(ctx, m);
}

static int print_banner(const struct ctx *ctx)
{
	aql_agent_info info;
	aql_status st = aql_agent_get_info(ctx->agent, &info);

	if (st != AQL_OK)
		return fail("aql_agent_get_info", st);
	printf("aql-bench: agent \"%s\" (%" PRIu32 " compute units), "
	       "queue size %" PRIu32 ", %s run, %" PRIu32 " mp threads\n\n",
	       info.name, info.compute_units, ctx->queue_size,
	       ctx->opts->quick ? "quick" : "full", ctx->opts->threads);
	return 0;
}

/* ---- driver ------------------------------------------------------------- */

static int run_mode(struct ctx *ctx, const struct mode *m)
{
	struct result *res;
	size_t i;

	for (i = 0; i < m->nbenches; i++) {
		progress(i + 1, m->nbenches, m->benches[i].metric);
		res = &ctx->results[ctx->nresults];
		memset(res, 0, sizeof(*res));
		res->metric = m->benches[i].metric;
		if (m->benches[i].run(ctx, res))
			return -1;
		ctx->nresults++;
	}
	progress_clear();
	return 0;
}

/* Fit the default queue size under the agent's limit. */
static int ctx_init(struct ctx *ctx, const struct opts *o)
{
	aql_agent_info info;
	aql_status st;

	memset(ctx, 0, sizeof(*ctx));
	ctx->opts = o;
	ctx->sz = o->quick ? quick_sizes : full_sizes;
	st = aql_agent_default(&ctx->agent);
	if (st != AQL_OK)
		return fail("aql_agent_default", st);
	st = aql_agent_get_info(ctx->agent, &info);
	if (st != AQL_OK)
		return fail("aql_agent_get_info", st);
	ctx->queue_size = QUEUE_SIZE;
	if (info.max_queue_size && info.max_queue_size < QUEUE_SIZE)
		ctx->queue_size = info.max_queue_size;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: aql-bench [--json] [--quick] [--threads N] [--help]\n"
		"\n"
		"Dispatch microbenchmarks on the default agent, with machine\n"
		"baselines from the same run and the goals they are judged by.\n"
		"\n"
		"  --json       JSON lines on stdout, one object per metric\n"
		"  --quick      about 10x fewer iterations (CI smoke runs)\n"
		"  --threads N  submitting threads for dispatch_throughput_mp\n"
		"               (default %u, 1..%u)\n"
		"  --help       show this text\n"
		"\n"
		"Goals are reported, not enforced; the exit status is non-zero\n"
		"only if a run failed.\n", DEFAULT_THREADS, MAX_THREADS);
}

static int parse_threads(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > MAX_THREADS)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* Returns -1 to exit with failure, 1 to exit successfully, 0 to run. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "quick", no_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->json = false;
	o->quick = false;
	o->threads = DEFAULT_THREADS;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->quick = true;
			break;
		case 't':
			if (parse_threads(optarg, &o->threads)) {
				fprintf(stderr, "aql-bench: --threads wants "
					"1..%u, got '%s'\n", MAX_THREADS, optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "aql-bench: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct mode *m = &modes[0];
	struct opts o;
	struct ctx ctx;
	int rc;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? 2 : 0;
	progress_on = isatty(STDERR_FILENO);
	if (ctx_init(&ctx, &o))
		return 1;
	if (!o.json && print_banner(&ctx))
		return 1;
	if (run_mode(&ctx, m))
		return 1;
	if (o.json)
		print_json(&ctx, m);
	else
		print_table(&ctx, m);
	return 0;
}
