/* SPDX-License-Identifier: MIT */
/*
 * aql-bench, default mode: dispatch microbenchmarks with machine baselines
 * measured in the same run, so that the numbers can be judged against what
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
 * dispatch_rtt_spin_block
 *	As dispatch_rtt_block, waiting with AQL_WAIT_SPIN_BLOCK (a short
 *	spin, then sleep): the like-for-like peer of dispatch_rtt_block_hsa,
 *	since the HSA layer waits out HSA_WAIT_STATE_BLOCKED that way.
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
 * dispatch_barrier_wg1000
 *	Round trip of one dispatch of a kernel with two work-group barriers,
 *	4000 work-items in groups of 1000, on a SINGLE queue: every
 *	work-item runs as a fiber and is switched at each barrier, so this
 *	is the cost of the CPU agent's work-item contexts. Timed as
 *	dispatch_rtt_block (AQL_WAIT_BLOCKED), block_samples / 10 samples.
 *
 * baseline_pingpong_rtt
 *	Two threads bounce a counter through one cache line, spinning:
 *	A stores i, B waits for i and answers -i, A waits for -i. Timed
 *	per round trip with the same clock_gettime() method as above.
 *
 * baseline_futex_rtt
 *	The same ping-pong, but each side sleeps in FUTEX_WAIT_PRIVATE and
 *	the other wakes it with FUTEX_WAKE_PRIVATE; no spinning at all.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

#define FULL_TIMEOUT_NS		(10ull * 1000000000ull)

/* ---- the barrier kernel ---------------------------------------------- */

#define BARRIER_GRID	4000u
#define BARRIER_WG	1000u

struct barrier_kernarg {
	uint32_t *out;
};

/* Each work-item writes its slot, waits, reads its neighbour's, waits
 * again: two barriers, so each context is switched out twice. */
static void barrier_kernel(const void *kernarg)
{
	const struct barrier_kernarg *a = kernarg;
	const aql_host_workitem *w = aql_host_workitem_current();
	uint32_t l = w->local_id[0], g = w->group_id[0] * BARRIER_WG;
	uint32_t v;

	a->out[g + l] = g + l;
	aql_host_barrier();
	v = a->out[g + (l + 1) % BARRIER_WG];
	aql_host_barrier();
	a->out[g + l] = v;
}

static const aql_host_kernel_descriptor barrier_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(barrier_kernel, struct barrier_kernarg, 0);

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
int await_done(aql_queue *q, aql_signal *sig, enum aql_wait_hint hint)
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

int queue_hold(aql_queue *q, aql_signal *gate)
{
	aql_packet p;
	aql_status st;

	memset(&p, 0, sizeof(p));
	p.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					     AQL_FENCE_SYSTEM);
	p.barrier.dep_signal[0] = aql_signal_handle(gate);
	aql_signal_store(gate, 1, AQL_RELAXED);
	st = aql_queue_submit(q, &p);
	return st == AQL_OK ? 0 : fail("aql_queue_submit", st);
}

/* ---- (a) dispatch round trip ------------------------------------------ */

/* n round trips of pkt, which completes sig; samples NULL: warm-up,
 * nothing recorded. */
static int rtt_loop(aql_queue *q, aql_signal *sig, const aql_packet *pkt,
		    enum aql_wait_hint hint, uint64_t *samples, uint32_t n)
{
	aql_status st;
	uint64_t t0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		aql_signal_store(sig, 1, AQL_RELAXED);
		t0 = now_ns();
		st = aql_queue_submit(q, pkt);
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
	aql_packet pkt;
	uint64_t *samples = alloc_samples(n);
	int rc = -1;

	if (!samples)
		return fail_errno("malloc", ENOMEM);
	if (queue_open(ctx, agent, AQL_QUEUE_SINGLE, &q) ||
	    signals_create(&sig, 1))
		goto out;
	pkt = empty_dispatch(0, sig);
	if (rtt_loop(q, sig, &pkt, hint, NULL, ctx->sz.warmup) ||
	    rtt_loop(q, sig, &pkt, hint, samples, n))
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

static int bench_barrier_wg1000(struct ctx *ctx, struct result *res)
{
	static _Alignas(16) struct barrier_kernarg args;
	uint32_t n = ctx->sz.block_samples / 10 ? ctx->sz.block_samples / 10 : 1;
	uint64_t *samples = alloc_samples(n);
	aql_queue *q = NULL;
	aql_signal *sig = NULL;
	aql_packet pkt;
	aql_dispatch_packet *d = &pkt.dispatch;
	int rc = -1;

	args.out = calloc(BARRIER_GRID, sizeof(*args.out));
	if (!samples || !args.out) {
		rc = fail_errno("malloc", ENOMEM);
		goto out;
	}
	if (queue_open(ctx, ctx->agent, AQL_QUEUE_SINGLE, &q) || signals_create(&sig, 1))
		goto out;
	pkt = empty_dispatch(0, sig);
	d->workgroup_size_x = BARRIER_WG;
	d->grid_size_x = BARRIER_GRID;
	d->kernel_object = (uint64_t)(uintptr_t)&barrier_kd;
	d->kernarg_address = (uint64_t)(uintptr_t)&args;
	/* One warm-up round first: it maps the work-item stacks. */
	if (rtt_loop(q, sig, &pkt, AQL_WAIT_BLOCKED, NULL, 1) ||
	    rtt_loop(q, sig, &pkt, AQL_WAIT_BLOCKED, samples, n))
		goto out;
	for (uint32_t i = 0; i < BARRIER_GRID; i++)
		if (args.out[i] != i / BARRIER_WG * BARRIER_WG + (i + 1) % BARRIER_WG) {
			fprintf(stderr, "aql-bench: barrier kernel: out[%u] = %u\n", i,
				args.out[i]);
			goto out;
		}
	res->kind = RESULT_LATENCY;
	latency_stats(samples, n, &res->lat);
	rc = 0;
out:
	if (q && queue_close(q))
		rc = -1;
	aql_signal_destroy(sig);
	free(args.out);
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

static int bench_rtt_spin_block(struct ctx *ctx, struct result *res)
{
	return bench_rtt(ctx, res, ctx->agent, AQL_WAIT_SPIN_BLOCK, ctx->sz.block_samples);
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
	const aql_packet body = empty_dispatch(t->barrier, NULL), last = empty_dispatch(1, sig);
	aql_status st;
	uint64_t t0;

	aql_signal_store(sig, 1, AQL_RELAXED);
	t0 = now_ns();
	st = submit_batch(t->q, &body, &last, t->packets);
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
	const aql_packet body = empty_dispatch(w->t->barrier, NULL), last = empty_dispatch(1, w->sig);

	pthread_barrier_wait(&w->t->start);
	w->start_ns = now_ns();
	w->st = submit_batch(w->t->q, &body, &last, w->packets);
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

/*
 * xcpu_rtt_ns(): A stores i in its line, B waits for it and stores i in
 * its own, A waits for that; each side writes only its own line and reads
 * the other's, as a submitter and its queue's processor do (packet and
 * doorbell one way, completion signal the other). The one-word ping-pong
 * above did not show the machine changing: 120 -> 230 ns where this went
 * 130 -> 500 ns and a dispatch round trip 170 -> 560 ns.
 */
#define XCPU_WARMUP	200u
#define XCPU_SAMPLES	2000u

struct xcpu {
	int32_t a __attribute__((aligned(64)));
	int32_t b __attribute__((aligned(64)));
};

static void *xcpu_echo(void *arg)
{
	struct xcpu *x = arg;

	for (int32_t i = 1; i <= (int32_t)(XCPU_WARMUP + XCPU_SAMPLES); i++) {
		while (__atomic_load_n(&x->a, __ATOMIC_ACQUIRE) != i)
			cpu_relax();
		__atomic_store_n(&x->b, i, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Pinned: the caller on first, B on last; the caller's mask put back. */
static int xcpu_run(int first, int last, const cpu_set_t *allowed, uint64_t *samples)
{
	struct xcpu x = { 0, 0 };
	pthread_attr_t attr;
	cpu_set_t one;
	pthread_t tid;
	uint64_t t0;
	int err;

	if (pthread_attr_init(&attr))
		return -1;
	CPU_ZERO(&one);
	CPU_SET(last, &one);
	err = pthread_attr_setaffinity_np(&attr, sizeof(one), &one) ||
	      pthread_create(&tid, &attr, xcpu_echo, &x);
	pthread_attr_destroy(&attr);
	if (err)
		return -1;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	sched_setaffinity(0, sizeof(one), &one);
	for (int32_t i = 1; i <= (int32_t)(XCPU_WARMUP + XCPU_SAMPLES); i++) {
		t0 = now_ns();
		__atomic_store_n(&x.a, i, __ATOMIC_RELEASE);
		while (__atomic_load_n(&x.b, __ATOMIC_ACQUIRE) != i)
			cpu_relax();
		if ((uint32_t)i > XCPU_WARMUP)
			samples[(uint32_t)i - 1 - XCPU_WARMUP] = now_ns() - t0;
	}
	pthread_join(tid, NULL);
	sched_setaffinity(0, sizeof(*allowed), allowed);
	return 0;
}

uint64_t xcpu_rtt_ns(void)
{
	uint64_t samples[XCPU_SAMPLES];
	struct latency lat;
	cpu_set_t allowed;
	int first = -1, last = -1;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) || CPU_COUNT(&allowed) < 2)
		return 0;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &allowed)) {
			first = first < 0 ? i : first;
			last = i;
		}
	if (xcpu_run(first, last, &allowed, samples))
		return 0;
	latency_stats(samples, XCPU_SAMPLES, &lat);
	return lat.p50;
}

static int bench_pingpong_spin(struct ctx *ctx, struct result *res)
{
	return bench_pingpong(ctx, res, false, ctx->sz.spin_samples);
}

static int bench_pingpong_futex(struct ctx *ctx, struct result *res)
{
	return bench_pingpong(ctx, res, true, ctx->sz.block_samples);
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

/* Each baseline runs right before the metric compared with it, so both
 * see the same placement of threads on (virtual) CPUs. */
static const struct bench dispatch_benches[] = {
	{ "baseline_pingpong_rtt",	 bench_pingpong_spin },
	{ "dispatch_rtt_spin",		 bench_rtt_spin },
	{ "baseline_futex_rtt",		 bench_pingpong_futex },
	{ "dispatch_rtt_block",		 bench_rtt_block },
	{ "dispatch_rtt_spin_block",	 bench_rtt_spin_block },
	{ "dispatch_rtt_block_parked",	 bench_rtt_block_parked },
	{ "dispatch_barrier_wg1000",	 bench_barrier_wg1000 },
	{ "dispatch_throughput",	 bench_tput },
	{ "dispatch_throughput_barrier", bench_tput_barrier },
	{ "dispatch_throughput_mp",	 bench_tput_mp },
	{ "baseline_malloc_free_ns",	 bench_baseline_malloc_free },
	{ "alloc_free_ns",		 bench_alloc_free },
	{ "launch_raw_ns",		 bench_launch_raw },
	{ "launch_typed_ns",		 bench_launch_typed },
	{ "launch_overhead_ns",		 bench_launch_overhead },
	{ "graph_replay_host_ns_per_launch", bench_graph_replay_host },
	{ "graph_individual_host_ns_per_launch", bench_graph_individual_host },
	{ "graph_chain_ns",		 bench_graph_chain },
	{ "graph_chain_individual_ns",	 bench_graph_chain_individual },
	{ "plainc_stencil_ns_per_point", bench_plainc_stencil },
	{ "kernel_stencil_ns_per_point", bench_kernel_stencil },
	{ "plainc_compute_ns_per_item",	 bench_plainc_compute },
	{ "kernel_compute_ns_per_item",	 bench_kernel_compute },
	{ "openmp_compute_ns_per_item",	 bench_openmp_compute },
	{ "kernel_compute_all_ns_per_item", bench_kernel_compute_all },
#ifdef AQL_BENCH_HSA
	{ "dispatch_rtt_spin_so",	 bench_rtt_spin_so },
	{ "dispatch_rtt_spin_hsa",	 bench_rtt_spin_hsa },
	{ "dispatch_rtt_spin_block_so",	 bench_rtt_spin_block_so },
	{ "dispatch_rtt_block_hsa",	 bench_rtt_block_hsa },
	{ "dispatch_throughput_so",	 bench_tput_so },
	{ "dispatch_throughput_hsa",	 bench_tput_hsa },
#endif
};

static const struct goal dispatch_goals[] = {
	{ "ratio_dispatch_rtt_spin_vs_pingpong",
	  "dispatch_rtt_spin p50 / baseline_pingpong_rtt p50",
	  "dispatch_rtt_spin", "baseline_pingpong_rtt", false, 2.0, NULL },
	{ "ratio_dispatch_rtt_block_vs_futex",
	  "dispatch_rtt_block p50 / baseline_futex_rtt p50",
	  "dispatch_rtt_block", "baseline_futex_rtt", false, 1.3, NULL },
	{ "ratio_dispatch_rtt_block_parked_vs_futex",
	  "dispatch_rtt_block_parked p50 / baseline_futex_rtt p50",
	  "dispatch_rtt_block_parked", "baseline_futex_rtt", false, 1.3, NULL },
	{ "ratio_dispatch_throughput_mp_vs_single",
	  "dispatch_throughput_mp / dispatch_throughput",
	  "dispatch_throughput_mp", "dispatch_throughput", true, 0.30, NULL },
	{ "goal_dispatch_throughput",
	  "dispatch_throughput (dispatches/s)",
	  "dispatch_throughput", NULL, true, 4e6, "dispatches/s" },
	{ "goal_alloc_free_ns",
	  "alloc_free_ns p50 (ns, 64..4096 B)",
	  "alloc_free_ns", NULL, false, 50, "ns" },
	{ "goal_launch_overhead_ns",
	  "launch_overhead_ns p50 (ns, 4-argument kernel)",
	  "launch_overhead_ns", NULL, false, 50, "ns" },
	/* Recorded graphs (graph.c): a 32-launch chain of the same kernel. */
	{ "ratio_graph_replay_vs_individual_host",
	  "graph_replay_host_ns_per_launch p50 / graph_individual_host_ns_per_launch p50 (>= 5x lower)",
	  "graph_replay_host_ns_per_launch", "graph_individual_host_ns_per_launch", false, 0.2,
	  NULL },
	{ "ratio_graph_chain_vs_individual",
	  "graph_chain_ns p50 / graph_chain_individual_ns p50",
	  "graph_chain_ns", "graph_chain_individual_ns", false, 0.8, NULL },
	/* Kernels at loop speed (speed.c). */
	{ "ratio_kernel_vs_plainc_stencil",
	  "kernel_stencil_ns_per_point / plainc_stencil_ns_per_point (1 worker)",
	  "kernel_stencil_ns_per_point", "plainc_stencil_ns_per_point", false, 1.25, NULL },
	{ "ratio_kernel_vs_plainc_compute",
	  "kernel_compute_ns_per_item / plainc_compute_ns_per_item (1 worker)",
	  "kernel_compute_ns_per_item", "plainc_compute_ns_per_item", false, 1.25, NULL },
	{ "ratio_kernel_all_vs_openmp_compute",
	  "openmp_compute_ns_per_item / kernel_compute_all_ns_per_item (speed, all cores)",
	  "openmp_compute_ns_per_item", "kernel_compute_all_ns_per_item", true, 0.8, NULL },
#ifdef AQL_BENCH_HSA
	/* What the HSA layer (hsa.c) adds: at most 5 %. */
	{ "ratio_dispatch_rtt_spin_hsa_vs_native",
	  "dispatch_rtt_spin_hsa p50 / dispatch_rtt_spin_so p50",
	  "dispatch_rtt_spin_hsa", "dispatch_rtt_spin_so", false, 1.05, NULL },
	{ "ratio_dispatch_rtt_block_hsa_vs_native",
	  "dispatch_rtt_block_hsa p50 / dispatch_rtt_spin_block_so p50",
	  "dispatch_rtt_block_hsa", "dispatch_rtt_spin_block_so", false, 1.05, NULL },
	{ "ratio_dispatch_throughput_hsa_vs_native",
	  "dispatch_throughput_hsa / dispatch_throughput_so",
	  "dispatch_throughput_hsa", "dispatch_throughput_so", true, 0.95, NULL },
#endif
};

#ifdef AQL_BENCH_HSA
static void dispatch_cleanup(struct ctx *ctx)
{
	(void)ctx;
	bench_hsa_cleanup();
}
#endif

static const struct peer dispatch_peers[] = {
	{ "alloc_free_ns", "baseline_malloc_free_ns" },
	{ "launch_typed_ns", "launch_raw_ns" },
};

const struct mode bench_mode_dispatch = {
	.name = "dispatch",
	.benches = dispatch_benches,
	.nbenches = ARRAY_SIZE(dispatch_benches),
	.goals = dispatch_goals,
	.ngoals = ARRAY_SIZE(dispatch_goals),
	.peers = dispatch_peers,
	.npeers = ARRAY_SIZE(dispatch_peers),
	.banner = dispatch_banner,
#ifdef AQL_BENCH_HSA
	.cleanup = dispatch_cleanup,
#endif
};
