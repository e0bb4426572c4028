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
 * With --load FILE, code-object loading instead:
 *
 * load_ms
 *	Per round: read FILE, aql_code_object_load() it on the default
 *	agent, get its info (the kernels are ready); then, untimed,
 *	destroy it. One warm-up round. Median, p90, min, max in ms.
 *
 * metadata_us_per_kernel
 *	Per round: reps times aql_code_object_open() on the bytes already
 *	read (ELF, metadata, descriptors), a walk reading every kernel's
 *	name, sizes, register counts and arguments, then destroy; the
 *	round's time / reps / kernels. reps is calibrated so that a round
 *	lasts a few milliseconds.
 *
 * metadata_parse_us_per_kernel
 *	The same with aql_metadata_parse() on the metadata note alone, to
 *	tell the parser's share from the ELF and descriptor work.
 *	The metadata readers (these two and comgr below) take turns round
 *	by round, so that a noisy spell hits them all alike.
 *
 * comgr_metadata_us_per_kernel
 *	The same for the ROCm code object manager, dlopen()ed at run time
 *	(never linked; AQL_BENCH_COMGR names another library file):
 *	amd_comgr_create_data(EXECUTABLE), set_data, get_data_metadata, and
 *	a walk through amdhsa.kernels reading the same keys, every scalar
 *	converted as a consumer would. Both walks are checked to agree on
 *	kernels, arguments, names and sizes before anything is timed.
 *	Without comgr this peer is skipped, and said so.
 *
 * The goals printed at the end are reported, never enforced: the exit
 * status only says whether every run succeeded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <gelf.h>
#include <libelf.h>

#include <aql/aql.h>
#include <aql/code_object.h>
#include <aql/metadata.h>

#define NT_AMDGPU_METADATA_NUM	32

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
	uint32_t load_rounds;
	uint32_t meta_rounds;
	uint64_t meta_round_ns;	/* reps are calibrated to about this */
};

static const struct sizes full_sizes = {
	.warmup = 2000,
	.spin_samples = 50000,
	.block_samples = 20000,
	.packets = 200000,
	.rounds = 9,
	.load_rounds = 21,
	.meta_rounds = 21,
	.meta_round_ns = 20000000,
};

static const struct sizes quick_sizes = {
	.warmup = 200,
	.spin_samples = 5000,
	.block_samples = 2000,
	.packets = 20000,
	.rounds = 5,
	.load_rounds = 5,
	.meta_rounds = 5,
	.meta_round_ns = 2000000,
};

struct opts {
	bool json;
	bool quick;
	uint32_t threads;
	const char *load_path;	/* --load FILE, or NULL */
};

enum result_kind {
	RESULT_NONE,
	RESULT_LATENCY,
	RESULT_RATE,
	RESULT_DURATION,
	RESULT_SKIPPED,
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

/* Per-round times of the --load mode, in unit. */
struct duration {
	const char *unit;	/* "ms", "us/kernel" */
	double median, p90, min, max;
	uint32_t rounds;
	uint32_t reps;		/* repetitions timed together per round */
	uint32_t kernels;	/* in the code object */
};

struct result {
	const char *metric;
	enum result_kind kind;
	union {
		struct latency lat;
		struct rate rate;
		struct duration dur;
		const char *skipped;	/* why, for RESULT_SKIPPED */
	};
};

struct comgr;

/* The metadata readers --load times, round by round in turn. */
enum { READER_AQL, READER_PARSE, READER_COMGR, READERS };

/* What --load works on, read once before the first benchmark. */
struct load_ctx {
	const char *path;
	unsigned char *image;
	size_t size;
	uint32_t kernels;
	uint32_t args;
	void *note;		/* copy of the NT_AMDGPU_METADATA descriptor */
	size_t note_size;
	struct comgr *comgr;	/* NULL: not installed */
	char comgr_why[320];	/* why it is NULL */
	struct duration meta[READERS];	/* see measure_readers() */
};

struct ctx {
	const struct opts *opts;
	struct sizes sz;
	aql_agent *agent;
	uint32_t queue_size;
	struct result results[MAX_BENCHES];
	size_t nresults;
	struct load_ctx load;
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
 * their results, with optional set-up (run before the banner) and
 * clean-up. Future modes (--read, --channel) add entries.
 */
struct mode {
	const char *name;
	const struct bench *benches;
	size_t nbenches;
	const struct goal *goals;
	size_t ngoals;
	int (*setup)(struct ctx *ctx);
	void (*cleanup)(struct ctx *ctx);
	int (*banner)(const struct ctx *ctx);
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

/* ---- (d) code-object loading (--load) ----------------------------------- */

/* Whole file into a fresh buffer; the caller frees *out. errno on failure. */
static int slurp(const char *path, unsigned char **out, size_t *size)
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

static int read_fail(const char *path, int err)
{
	progress_clear();
	fprintf(stderr, "aql-bench: cannot read %s: %s\n", path, strerror(err));
	return -1;
}

/* Median, p90 (nearest rank), min and max of n per-round values. */
static void duration_stats(double *v, uint32_t n, const char *unit,
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

/*
 * What a walk read, summed so that the two walks can be compared: names
 * hashed, sizes and counts added up. Reading every value also keeps the
 * compiler from dropping the walk.
 */
struct walk_sum {
	uint64_t kernels;
	uint64_t args;
	uint64_t names;		/* FNV-1a of kernel, symbol, arg and type names */
	uint64_t sizes;		/* kernel sizes, register counts, arg offsets/sizes */
};

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t hash_str(const char *s)
{
	return s ? fnv1a(s, strlen(s)) : 0;
}

static void walk_aql(const aql_metadata *meta, struct walk_sum *sum)
{
	const aql_kernel_metadata *md;
	const aql_kernel_arg *a;
	uint32_t i, j;

	memset(sum, 0, sizeof(*sum));
	for (i = 0; i < meta->kernel_count; i++) {
		md = &meta->kernels[i];
		sum->kernels++;
		sum->names += hash_str(md->name) + hash_str(md->symbol);
		sum->sizes += (uint64_t)md->kernarg_segment_size +
			      md->kernarg_segment_align +
			      md->group_segment_fixed_size +
			      md->private_segment_fixed_size +
			      md->wavefront_size + md->sgpr_count +
			      md->vgpr_count + md->max_flat_workgroup_size;
		for (j = 0; j < md->arg_count; j++) {
			a = &md->args[j];
			sum->args++;
			sum->names += hash_str(a->name) + hash_str(a->type_name);
			sum->sizes += (uint64_t)a->offset + a->size + a->kind +
				      a->address_space + a->access;
		}
	}
}

/* One aql round unit: open, walk, destroy. */
static int aql_meta_once(const struct load_ctx *l, struct walk_sum *sum)
{
	aql_code_object *co;
	aql_status st;

	st = aql_code_object_open(l->image, l->size, &co);
	if (st != AQL_OK)
		return fail("aql_code_object_open", st);
	walk_aql(aql_code_object_get_info(co)->metadata, sum);
	aql_code_object_destroy(co);
	return 0;
}

/* The parser alone, on the note found by load_setup(). */
static int aql_parse_once(const struct load_ctx *l, struct walk_sum *sum)
{
	aql_metadata *md;
	aql_status st;

	st = aql_metadata_parse(l->note, l->note_size, &md);
	if (st != AQL_OK)
		return fail("aql_metadata_parse", st);
	walk_aql(md, sum);
	aql_metadata_free(md);
	return 0;
}

/*
 * A copy of the NT_AMDGPU_METADATA note descriptor of the image in
 * l->note, or NULL if there is none (a host code object). Only for the
 * parser-alone figure, so any libelf trouble just means "no note".
 */
static void find_metadata_note(struct load_ctx *l)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	Elf_Data *data;
	GElf_Shdr sh;
	GElf_Nhdr nh;
	size_t off, name_off, desc_off;

	l->note = NULL;
	l->note_size = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return;
	elf = elf_memory((char *)l->image, l->size);
	if (!elf)
		return;
	while (!l->note && (scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		off = 0;
		while (data && (off = gelf_getnote(data, off, &nh, &name_off,
						   &desc_off)) > 0) {
			if (nh.n_type != NT_AMDGPU_METADATA_NUM ||
			    nh.n_namesz != 7 ||
			    memcmp((char *)data->d_buf + name_off, "AMDGPU", 7))
				continue;
			/* libelf's buffer dies with elf_end(): copy. */
			l->note = malloc(nh.n_descsz ? nh.n_descsz : 1);
			if (l->note) {
				memcpy(l->note, (char *)data->d_buf + desc_off,
				       nh.n_descsz);
				l->note_size = nh.n_descsz;
			}
			break;
		}
	}
	elf_end(elf);
}

/*
 * The ROCm code object manager, reached through dlopen() only, so aql
 * neither links it nor needs its header. These declarations follow its
 * C ABI (amd_comgr.h, interface 2.x): handles are one-word structs and
 * statuses small enums.
 */
typedef struct { uint64_t handle; } cg_data;
typedef struct { uint64_t handle; } cg_node;
typedef int cg_status;

#define CG_SUCCESS		0
#define CG_DATA_KIND_EXECUTABLE	0x8
#define CG_METADATA_KIND_STRING	0x1

#define COMGR_DEFAULT_LIB	"libamd_comgr.so.2"

struct comgr {
	void *lib;
	char path[256];
	size_t major, minor;
	void (*get_version)(size_t *major, size_t *minor);
	cg_status (*status_string)(cg_status st, const char **str);
	cg_status (*create_data)(int kind, cg_data *data);
	cg_status (*release_data)(cg_data data);
	cg_status (*set_data)(cg_data data, size_t size, const char *bytes);
	cg_status (*get_data_metadata)(cg_data data, cg_node *md);
	cg_status (*destroy_metadata)(cg_node md);
	cg_status (*metadata_lookup)(cg_node map, const char *key, cg_node *val);
	cg_status (*get_metadata_kind)(cg_node md, int *kind);
	cg_status (*get_metadata_string)(cg_node md, size_t *size, char *str);
	cg_status (*get_metadata_list_size)(cg_node md, size_t *size);
	cg_status (*index_list_metadata)(cg_node md, size_t i, cg_node *val);
};

static int comgr_fail(const struct comgr *cg, const char *call, cg_status st)
{
	const char *str = NULL;

	if (cg->status_string(st, &str) != CG_SUCCESS || !str)
		str = "unknown status";
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: status %d (%s)\n", call, st, str);
	return -1;
}

/*
 * Open comgr; NULL with the reason in why when it is not there (or is a
 * library without the calls the walk needs), which skips the peer.
 */
static struct comgr *comgr_open(char *why, size_t len)
{
	const char *name = getenv("AQL_BENCH_COMGR");
	struct comgr *cg;
	const char *missing = NULL;

	if (!name || !*name)
		name = COMGR_DEFAULT_LIB;
	cg = calloc(1, sizeof(*cg));
	if (!cg) {
		snprintf(why, len, "comgr: out of memory, peer skipped");
		return NULL;
	}
	cg->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!cg->lib) {
		snprintf(why, len, "comgr: not installed, peer skipped (%s)",
			 dlerror());
		free(cg);
		return NULL;
	}
	snprintf(cg->path, sizeof(cg->path), "%s", name);
#define CG_SYM(field, sym)						\
	do {								\
		*(void **)&cg->field = dlsym(cg->lib, sym);		\
		if (!cg->field && !missing)				\
			missing = sym;					\
	} while (0)
	CG_SYM(get_version, "amd_comgr_get_version");
	CG_SYM(status_string, "amd_comgr_status_string");
	CG_SYM(create_data, "amd_comgr_create_data");
	CG_SYM(release_data, "amd_comgr_release_data");
	CG_SYM(set_data, "amd_comgr_set_data");
	CG_SYM(get_data_metadata, "amd_comgr_get_data_metadata");
	CG_SYM(destroy_metadata, "amd_comgr_destroy_metadata");
	CG_SYM(metadata_lookup, "amd_comgr_metadata_lookup");
	CG_SYM(get_metadata_kind, "amd_comgr_get_metadata_kind");
	CG_SYM(get_metadata_string, "amd_comgr_get_metadata_string");
	CG_SYM(get_metadata_list_size, "amd_comgr_get_metadata_list_size");
	CG_SYM(index_list_metadata, "amd_comgr_index_list_metadata");
#undef CG_SYM
	if (missing) {
		snprintf(why, len, "comgr: %s lacks %s, peer skipped", name,
			 missing);
		dlclose(cg->lib);
		free(cg);
		return NULL;
	}
	cg->get_version(&cg->major, &cg->minor);
	return cg;
}

static void comgr_close(struct comgr *cg)
{
	if (!cg)
		return;
	dlclose(cg->lib);
	free(cg);
}

/*
 * A string-valued key of a map, as a consumer reads it: look up, ask the
 * size, copy. comgr gives numbers as strings too. Absent keys leave buf
 * empty and *found false; that is not an error.
 */
static int cg_get(const struct comgr *cg, cg_node map, const char *key,
		  char *buf, size_t len, bool *found)
{
	cg_node val;
	size_t n = 0;
	int kind = 0;
	cg_status st;

	buf[0] = 0;
	*found = false;
	if (cg->metadata_lookup(map, key, &val) != CG_SUCCESS)
		return 0;
	st = cg->get_metadata_kind(val, &kind);
	if (st == CG_SUCCESS && kind == CG_METADATA_KIND_STRING) {
		st = cg->get_metadata_string(val, &n, NULL);
		if (st == CG_SUCCESS && n > len)
			n = len;	/* longer than any name we compare */
		if (st == CG_SUCCESS)
			st = cg->get_metadata_string(val, &n, buf);
		buf[len - 1] = 0;
		*found = st == CG_SUCCESS;
	}
	cg->destroy_metadata(val);
	if (st != CG_SUCCESS)
		return comgr_fail(cg, "amd_comgr_get_metadata_string", st);
	return 0;
}

static int cg_hash(const struct comgr *cg, cg_node map, const char *key,
		   uint64_t *acc)
{
	char buf[1024];
	bool found;

	if (cg_get(cg, map, key, buf, sizeof(buf), &found))
		return -1;
	if (found)
		*acc += fnv1a(buf, strlen(buf));
	return 0;
}

static int cg_number(const struct comgr *cg, cg_node map, const char *key,
		     uint64_t *acc)
{
	char buf[64];
	bool found;

	if (cg_get(cg, map, key, buf, sizeof(buf), &found))
		return -1;
	if (found)
		*acc += strtoull(buf, NULL, 0);
	return 0;
}

/* Keys read from every kernel map, and from every .args entry. */
static const char *const cg_kernel_numbers[] = {
	".kernarg_segment_size", ".kernarg_segment_align",
	".group_segment_fixed_size", ".private_segment_fixed_size",
	".wavefront_size", ".sgpr_count", ".vgpr_count",
	".max_flat_workgroup_size",
};

static const char *const cg_arg_strings[] = {
	".value_kind", ".address_space", ".access",
};

/* The enum aql gives for what comgr spells out, so that sums compare. */
static uint64_t cg_enum_value(const char *key, const char *val)
{
	static const char *const spaces[] = {
		"", "private", "global", "constant", "local", "generic", "region",
	};
	static const char *const access[] = {
		"", "read_only", "write_only", "read_write",
	};
	uint32_t i;

	if (!strcmp(key, ".address_space")) {
		for (i = 1; i < ARRAY_SIZE(spaces); i++)
			if (!strcmp(val, spaces[i]))
				return i;
	} else if (!strcmp(key, ".access")) {
		for (i = 1; i < ARRAY_SIZE(access); i++)
			if (!strcmp(val, access[i]))
				return i;
	} else {
		for (i = 1; i < AQL_ARG_KIND_COUNT; i++)
			if (!strcmp(val, aql_arg_kind_name((enum aql_arg_kind)i)))
				return i;
	}
	return 0;
}

static int cg_walk_arg(const struct comgr *cg, cg_node arg,
		       struct walk_sum *sum)
{
	char buf[64];
	bool found;
	size_t i;

	sum->args++;
	if (cg_hash(cg, arg, ".name", &sum->names) ||
	    cg_hash(cg, arg, ".type_name", &sum->names) ||
	    cg_number(cg, arg, ".offset", &sum->sizes) ||
	    cg_number(cg, arg, ".size", &sum->sizes))
		return -1;
	for (i = 0; i < ARRAY_SIZE(cg_arg_strings); i++) {
		if (cg_get(cg, arg, cg_arg_strings[i], buf, sizeof(buf), &found))
			return -1;
		if (found)
			sum->sizes += cg_enum_value(cg_arg_strings[i], buf);
	}
	return 0;
}

static int cg_walk_kernel(const struct comgr *cg, cg_node kern,
			  struct walk_sum *sum)
{
	cg_node args, arg;
	size_t nargs = 0, i;
	cg_status st;
	int rc = 0;

	sum->kernels++;
	if (cg_hash(cg, kern, ".name", &sum->names) ||
	    cg_hash(cg, kern, ".symbol", &sum->names))
		return -1;
	for (i = 0; i < ARRAY_SIZE(cg_kernel_numbers); i++)
		if (cg_number(cg, kern, cg_kernel_numbers[i], &sum->sizes))
			return -1;
	if (cg->metadata_lookup(kern, ".args", &args) != CG_SUCCESS)
		return 0;	/* a kernel without arguments */
	st = cg->get_metadata_list_size(args, &nargs);
	if (st != CG_SUCCESS)
		rc = comgr_fail(cg, "amd_comgr_get_metadata_list_size", st);
	for (i = 0; !rc && i < nargs; i++) {
		st = cg->index_list_metadata(args, i, &arg);
		if (st != CG_SUCCESS) {
			rc = comgr_fail(cg, "amd_comgr_index_list_metadata", st);
			break;
		}
		rc = cg_walk_arg(cg, arg, sum);
		cg->destroy_metadata(arg);
	}
	cg->destroy_metadata(args);
	return rc;
}

/* One comgr round unit: data object, metadata, walk, release. */
static int comgr_meta_once(const struct load_ctx *l, struct walk_sum *sum)
{
	const struct comgr *cg = l->comgr;
	cg_data data = { 0 };
	cg_node root = { 0 }, kernels = { 0 }, kern;
	bool have_root = false, have_kernels = false;
	size_t n = 0, i;
	cg_status st;
	int rc = -1;

	memset(sum, 0, sizeof(*sum));
	st = cg->create_data(CG_DATA_KIND_EXECUTABLE, &data);
	if (st != CG_SUCCESS)
		return comgr_fail(cg, "amd_comgr_create_data", st);
	st = cg->set_data(data, l->size, (const char *)l->image);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_set_data", st);
		goto out;
	}
	st = cg->get_data_metadata(data, &root);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_get_data_metadata", st);
		goto out;
	}
	have_root = true;
	st = cg->metadata_lookup(root, "amdhsa.kernels", &kernels);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_metadata_lookup(amdhsa.kernels)", st);
		goto out;
	}
	have_kernels = true;
	st = cg->get_metadata_list_size(kernels, &n);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_get_metadata_list_size", st);
		goto out;
	}
	for (i = 0; i < n; i++) {
		st = cg->index_list_metadata(kernels, i, &kern);
		if (st != CG_SUCCESS) {
			comgr_fail(cg, "amd_comgr_index_list_metadata", st);
			goto out;
		}
		rc = cg_walk_kernel(cg, kern, sum);
		cg->destroy_metadata(kern);
		if (rc)
			goto out;
	}
	rc = 0;
out:
	if (have_kernels)
		cg->destroy_metadata(kernels);
	if (have_root)
		cg->destroy_metadata(root);
	cg->release_data(data);
	return rc;
}

typedef int (*meta_fn)(const struct load_ctx *l, struct walk_sum *sum);

/* reps calls of once; the time per kernel in us. */
static int time_reps(const struct load_ctx *l, meta_fn once, uint32_t reps,
		     double *us)
{
	struct walk_sum sum;
	uint64_t t0 = now_ns();
	uint32_t i;

	for (i = 0; i < reps; i++)
		if (once(l, &sum))
			return -1;
	*us = (double)(now_ns() - t0) / 1e3 / reps / l->kernels;
	return 0;
}

/*
 * All readers at once, interleaved: round r times aql, then the parser,
 * then comgr, so that a slow spell of this (virtual) machine hits every
 * reader alike instead of one metric. Each reader first runs once
 * untimed, which warms caches and lazy set-up and calibrates its reps.
 * The results wait in ctx->load.meta for the benches that report them.
 */
static int measure_readers(struct ctx *ctx)
{
	struct load_ctx *l = &ctx->load;
	const meta_fn fns[READERS] = {
		aql_meta_once,
		l->note ? aql_parse_once : NULL,
		l->comgr ? comgr_meta_once : NULL,
	};
	uint32_t n = ctx->sz.meta_rounds, reps[READERS] = { 0 }, r, k;
	double *v[READERS] = { NULL };
	double one;
	int rc = -1;

	if (!l->kernels) {
		progress_clear();
		fprintf(stderr, "aql-bench: %s has no kernels: no time per "
			"kernel to report\n", l->path);
		return -1;
	}
	for (k = 0; k < READERS; k++) {
		if (!fns[k])
			continue;
		v[k] = calloc(n, sizeof(*v[k]));
		if (!v[k]) {
			fail_errno("calloc", ENOMEM);
			goto out;
		}
		if (time_reps(l, fns[k], 1, &one))
			goto out;
		one *= 1e3 * l->kernels;	/* ns per call */
		reps[k] = one >= 1 ? (uint32_t)(ctx->sz.meta_round_ns / one) : 1000;
		reps[k] = reps[k] < 1 ? 1 : reps[k] > 1000 ? 1000 : reps[k];
	}
	for (r = 0; r < n; r++)
		for (k = 0; k < READERS; k++)
			if (fns[k] && time_reps(l, fns[k], reps[k], &v[k][r]))
				goto out;
	for (k = 0; k < READERS; k++)
		if (fns[k])
			duration_stats(v[k], n, "us/kernel", reps[k], l->kernels,
				       &l->meta[k]);
	rc = 0;
out:
	for (k = 0; k < READERS; k++)
		free(v[k]);
	return rc;
}

static void report_reader(struct ctx *ctx, struct result *res, int k)
{
	res->kind = RESULT_DURATION;
	res->dur = ctx->load.meta[k];
}

static int bench_meta_aql(struct ctx *ctx, struct result *res)
{
	if (measure_readers(ctx))
		return -1;
	report_reader(ctx, res, READER_AQL);
	return 0;
}

static int bench_parse_aql(struct ctx *ctx, struct result *res)
{
	if (!ctx->load.note) {
		res->kind = RESULT_SKIPPED;
		res->skipped = "no NT_AMDGPU_METADATA note (host code object?)";
		return 0;
	}
	report_reader(ctx, res, READER_PARSE);
	return 0;
}

static int bench_meta_comgr(struct ctx *ctx, struct result *res)
{
	if (!ctx->load.comgr) {
		res->kind = RESULT_SKIPPED;
		res->skipped = ctx->load.comgr_why;
		return 0;
	}
	report_reader(ctx, res, READER_COMGR);
	return 0;
}

static int bench_load_ms(struct ctx *ctx, struct result *res)
{
	const struct load_ctx *l = &ctx->load;
	uint32_t n = ctx->sz.load_rounds, r;
	const aql_code_object_info *info;
	aql_code_object *co;
	unsigned char *buf;
	size_t size;
	aql_status st;
	uint64_t t0, t;
	double *v = calloc(n, sizeof(*v));
	int rc = -1;

	if (!v)
		return fail_errno("calloc", ENOMEM);
	/* Round 0 warms up and is not recorded. */
	for (r = 0; r <= n; r++) {
		t0 = now_ns();
		if (slurp(l->path, &buf, &size)) {
			read_fail(l->path, errno);
			goto out;
		}
		st = aql_code_object_load(ctx->agent, buf, size, NULL, &co);
		if (st != AQL_OK) {
			free(buf);
			fail("aql_code_object_load", st);
			goto out;
		}
		info = aql_code_object_get_info(co);
		t = now_ns() - t0;
		if (info->kernel_count != l->kernels) {
			progress_clear();
			fprintf(stderr, "aql-bench: loading %s gave %" PRIu32
				" kernels, opening it %" PRIu32 "\n", l->path,
				info->kernel_count, l->kernels);
			aql_code_object_destroy(co);
			free(buf);
			goto out;
		}
		aql_code_object_destroy(co);
		free(buf);
		if (r)
			v[r - 1] = (double)t / 1e6;
	}
	res->kind = RESULT_DURATION;
	duration_stats(v, n, "ms", 1, l->kernels, &res->dur);
	rc = 0;
out:
	free(v);
	return rc;
}

/*
 * Read the file, open it once for its kernel count, and check that the
 * comgr walk, if comgr is there, reads the same things the aql walk does.
 */
static int load_setup(struct ctx *ctx)
{
	struct load_ctx *l = &ctx->load;
	struct walk_sum a, c;

	l->path = ctx->opts->load_path;
	if (slurp(l->path, &l->image, &l->size))
		return read_fail(l->path, errno);
	if (aql_meta_once(l, &a)) {
		fprintf(stderr, "aql-bench: %s is not a code object libaql "
			"reads\n", l->path);
		return -1;
	}
	l->kernels = (uint32_t)a.kernels;
	l->args = (uint32_t)a.args;
	find_metadata_note(l);
	if (!l->note) {
		/* A host code object: nothing comgr could read. */
		snprintf(l->comgr_why, sizeof(l->comgr_why),
			 "comgr: no AMDGPU metadata in %s, peer skipped", l->path);
		return 0;
	}
	l->comgr = comgr_open(l->comgr_why, sizeof(l->comgr_why));
	if (!l->comgr)
		return 0;
	if (comgr_meta_once(l, &c)) {
		fprintf(stderr, "aql-bench: comgr cannot read %s\n", l->path);
		return -1;
	}
	if (memcmp(&a, &c, sizeof(a))) {
		fprintf(stderr, "aql-bench: aql and comgr read %s differently: "
			"kernels %" PRIu64 "/%" PRIu64 ", args %" PRIu64 "/%"
			PRIu64 ", names %016" PRIx64 "/%016" PRIx64
			", sizes %" PRIu64 "/%" PRIu64 "\n", l->path,
			a.kernels, c.kernels, a.args, c.args, a.names, c.names,
			a.sizes, c.sizes);
		return -1;
	}
	return 0;
}

static void load_cleanup(struct ctx *ctx)
{
	comgr_close(ctx->load.comgr);
	ctx->load.comgr = NULL;
	free(ctx->load.image);
	ctx->load.image = NULL;
	free(ctx->load.note);
	ctx->load.note = NULL;
}

static int load_banner(const struct ctx *ctx)
{
	const struct load_ctx *l = &ctx->load;
	aql_agent_info info;
	aql_status st = aql_agent_get_info(ctx->agent, &info);

	if (st != AQL_OK)
		return fail("aql_agent_get_info", st);
	printf("aql-bench --load %s: %zu bytes, %" PRIu32 " kernels, %" PRIu32
	       " args\nagent \"%s\", %s run\n", l->path, l->size, l->kernels,
	       l->args, info.name, ctx->opts->quick ? "quick" : "full");
	if (l->comgr)
		printf("comgr: %s, interface %zu.%zu\n", l->comgr->path,
		       l->comgr->major, l->comgr->minor);
	else
		printf("%s\n", l->comgr_why);
	putchar('\n');
	return 0;
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

static int dispatch_banner(const struct ctx *ctx);

/* The peer runs right after aql, on the same bytes and the same CPU state. */
static const struct bench load_benches[] = {
	{ "load_ms",			  bench_load_ms },
	{ "metadata_us_per_kernel",	  bench_meta_aql },
	{ "metadata_parse_us_per_kernel", bench_parse_aql },
	{ "comgr_metadata_us_per_kernel", bench_meta_comgr },
};

static const struct goal load_goals[] = {
	{ "ratio_comgr_over_aql",
	  "comgr / aql metadata_us_per_kernel",
	  "comgr_metadata_us_per_kernel", "metadata_us_per_kernel", true, 10.0 },
};

static const struct mode modes[] = {
	{
		.name = "dispatch",
		.benches = dispatch_benches,
		.nbenches = ARRAY_SIZE(dispatch_benches),
		.goals = dispatch_goals,
		.ngoals = ARRAY_SIZE(dispatch_goals),
		.banner = dispatch_banner,
	},
	{
		.name = "load",
		.benches = load_benches,
		.nbenches = ARRAY_SIZE(load_benches),
		.goals = load_goals,
		.ngoals = ARRAY_SIZE(load_goals),
		.setup = load_setup,
		.cleanup = load_cleanup,
		.banner = load_banner,
	},
};

static const struct mode *find_mode(const char *name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(modes); i++)
		if (!strcmp(modes[i].name, name))
			return &modes[i];
	return NULL;
}

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

/* The number a goal compares: p50 of a latency, median of the others. */
static double headline(const struct result *r)
{
	if (r->kind == RESULT_LATENCY)
		return (double)r->lat.p50;
	if (r->kind == RESULT_RATE)
		return r->rate.median;
	if (r->kind == RESULT_DURATION)
		return r->dur.median;
	return 0;
}

static bool has_headline(const struct result *r)
{
	return r && (r->kind == RESULT_LATENCY || r->kind == RESULT_RATE ||
		     r->kind == RESULT_DURATION);
}

static bool goal_value(const struct ctx *ctx, const struct goal *g,
		       double *value)
{
	const struct result *num = find_result(ctx, g->num);
	const struct result *den = g->den ? find_result(ctx, g->den) : NULL;

	/* A skipped peer leaves its goals unjudged, not missed. */
	if (!has_headline(num) || (g->den && (!has_headline(den) ||
					      headline(den) == 0)))
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

/*
 * A skip reason quoted in JSON: dlerror() text could hold quotes or
 * control bytes; replace them rather than escape, it is only prose.
 */
static const char *json_safe(const char *s)
{
	static char buf[512];
	size_t i;

	snprintf(buf, sizeof(buf), "%s", s);
	for (i = 0; buf[i]; i++)
		if (buf[i] == '"' || buf[i] == '\\' ||
		    (unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '\'';
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
	else if (r->kind == RESULT_DURATION)
		printf("{\"metric\":\"%s\",\"unit\":\"%s\",\"value\":%.4f,"
		       "\"p50\":%.4f,\"p90\":%.4f,\"min\":%.4f,\"max\":%.4f,"
		       "\"rounds\":%" PRIu32 ",\"reps\":%" PRIu32
		       ",\"kernels\":%" PRIu32 "}\n",
		       r->metric, r->dur.unit, r->dur.median, r->dur.median,
		       r->dur.p90, r->dur.min, r->dur.max, r->dur.rounds,
		       r->dur.reps, r->dur.kernels);
	else if (r->kind == RESULT_SKIPPED)
		printf("{\"metric\":\"%s\",\"skipped\":true,"
		       "\"reason\":\"%s\"}\n", r->metric,
		       json_safe(r->skipped));
}

static void json_goal(const struct ctx *ctx, const struct goal *g)
{
	double v;

	if (!goal_value(ctx, g, &v)) {
		printf("{\"metric\":\"%s\",\"skipped\":true}\n", g->metric);
		return;
	}
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

static bool any_of_kind(const struct ctx *ctx, enum result_kind kind)
{
	size_t i;

	for (i = 0; i < ctx->nresults; i++)
		if (ctx->results[i].kind == kind)
			return true;
	return false;
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

/* Durations, and the peers that were skipped with the reason. */
static void table_duration(const struct ctx *ctx)
{
	const struct result *r;
	size_t i;

	printf("%-30s %10s %10s %10s %10s %9s %6s %6s\n", "time", "median",
	       "p90", "min", "max", "unit", "rounds", "reps");
	for (i = 0; i < ctx->nresults; i++) {
		r = &ctx->results[i];
		if (r->kind == RESULT_SKIPPED)
			printf("  %-28s %s\n", r->metric, r->skipped);
		if (r->kind != RESULT_DURATION)
			continue;
		printf("  %-28s %10.4f %10.4f %10.4f %10.4f %9s %6" PRIu32
		       " %6" PRIu32 "\n", r->metric, r->dur.median, r->dur.p90,
		       r->dur.min, r->dur.max, r->dur.unit, r->dur.rounds,
		       r->dur.reps);
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
		if (!goal_value(ctx, g, &value)) {
			printf("  %-50s %9s\n", g->label, "skipped");
			continue;
		}
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

/* Only the tables this mode has results for. */
static void print_table(const struct ctx *ctx, const struct mode *m)
{
	if (any_of_kind(ctx, RESULT_LATENCY)) {
		table_latency(ctx);
		putchar('\n');
	}
	if (any_of_kind(ctx, RESULT_RATE)) {
		table_rate(ctx);
		putchar('\n');
	}
	if (any_of_kind(ctx, RESULT_DURATION) || any_of_kind(ctx, RESULT_SKIPPED)) {
		table_duration(ctx);
		putchar('\n');
	}
	table_goals(ctx, m);
}

static int dispatch_banner(const struct ctx *ctx)
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
		"       aql-bench [--json] [--quick] --load FILE\n"
		"\n"
		"Dispatch microbenchmarks on the default agent, with machine\n"
		"baselines from the same run and the goals they are judged by.\n"
		"With --load, code-object loading and metadata reading instead,\n"
		"next to the ROCm code object manager (comgr) if installed.\n"
		"\n"
		"  --json       JSON lines on stdout, one object per metric\n"
		"  --quick      about 10x fewer iterations (CI smoke runs)\n"
		"  --threads N  submitting threads for dispatch_throughput_mp\n"
		"               (default %u, 1..%u)\n"
		"  --load FILE  time loading the code object FILE and reading\n"
		"               its metadata (AQL_BENCH_COMGR: comgr library\n"
		"               to dlopen, default " COMGR_DEFAULT_LIB ")\n"
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
		{ "load", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->json = false;
	o->quick = false;
	o->threads = DEFAULT_THREADS;
	o->load_path = NULL;
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
		case 'l':
			o->load_path = optarg;
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
	const struct mode *m;
	struct opts o;
	struct ctx ctx;
	int rc;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? 2 : 0;
	m = find_mode(o.load_path ? "load" : "dispatch");
	progress_on = isatty(STDERR_FILENO);
	if (ctx_init(&ctx, &o))
		return 1;
	rc = m->setup ? m->setup(&ctx) : 0;
	if (!rc && !o.json && m->banner(&ctx))
		rc = -1;
	if (!rc)
		rc = run_mode(&ctx, m);
	if (!rc) {
		if (o.json)
			print_json(&ctx, m);
		else
			print_table(&ctx, m);
	}
	if (m->cleanup)
		m->cleanup(&ctx);
	return rc ? 1 : 0;
}
