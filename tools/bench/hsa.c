/* SPDX-License-Identifier: MIT */
/*
 * aql-bench, default mode: the empty dispatch of dispatch.c written
 * through the HSA API, on aql's libhsa-runtime64.so.1, in the same run as
 * the native figures, so that the ratio is what the HSA layer costs.
 *
 * The library is dlopen()ed, not linked: aql-bench then runs (and skips
 * these rows with the reason) where the layer was not built or is not
 * installed, and refuses ROCr's library of the same name. It brings its
 * own copy of libaql.so with its own default CPU agent, configured as the
 * native one; the native agent's workers are parked while these run.
 * Looked for in $AQL_BENCH_HSA_LIB, then beside the build's aql-bench
 * (../hsa/), then on the loader's path.
 *
 * dispatch_rtt_spin_hsa, dispatch_rtt_block_hsa
 *	As dispatch_rtt_spin and dispatch_rtt_block, as an HSA program does
 *	it: hsa_signal_store_relaxed of the completion signal, then the
 *	write index loaded and stored (one producer, as the native path),
 *	the packet written into the ring with its header stored last
 *	(release), the doorbell rung with
 *	hsa_signal_store_screlease, and hsa_signal_wait_scacquire with
 *	HSA_WAIT_STATE_ACTIVE resp. BLOCKED (which the layer waits out
 *	as AQL_WAIT_SPIN_BLOCK, spinning briefly before it sleeps, as ROCr
 *	does): compared with dispatch_rtt_spin resp. dispatch_rtt_spin_block.
 *
 * dispatch_throughput_so
 *	N packets back to back on a SINGLE queue, the last one signalling,
 *	by aqlbench-native.so (native_so.c) on the libaql.so the HSA
 *	library runs on, with publish.h's producer on aql's own atomics
 *	and aql_queue_load_read_index().
 *	aql-bench's own rows run on its static libaql, whose packet
 *	processor is not position-independent code, and submit with
 *	aql_queue_submit(), which sleeps when the ring is full, as no HSA
 *	call can; so this row, not dispatch_throughput, is the peer that
 *	leaves only the HSA layer as the difference. Its rounds and
 *	dispatch_throughput_hsa's run in pairs, each pair on queues made
 *	for it, the first of each pair alternating (native, HSA, HSA,
 *	native, ...), so that a busier moment of the machine, the place in
 *	a pair and where a queue landed fall on both.
 *
 * dispatch_throughput_hsa
 *	The same rounds with publish.h's producer making the HSA program's
 *	calls: hsa_queue_load_write_index_relaxed,
 *	hsa_queue_store_write_index_relaxed, hsa_signal_store_screlease
 *	on the doorbell, and hsa_queue_load_read_index_scacquire when the
 *	ring looks full.
 *
 * The kernel object is dispatch.c's empty host kernel descriptor, the
 * object the CPU agent runs (an executable's "name.kd" symbol is the same
 * kind of address); the packets are the native benchmark's byte for byte.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include "bench.h"
#include "publish.h"

#define HSA_LIB "libhsa-runtime64.so.1"
#define NATIVE_SO "aqlbench-native.so"

/* The entry points these benchmarks call, resolved from the library. */
struct hsa_fns {
	void *lib;
	hsa_status_t (*init)(void);
	hsa_status_t (*shut_down)(void);
	hsa_status_t (*status_string)(hsa_status_t, const char **);
	hsa_status_t (*system_get_info)(hsa_system_info_t, void *);
	hsa_status_t (*iterate_agents)(hsa_status_t (*)(hsa_agent_t, void *), void *);
	hsa_status_t (*agent_get_info)(hsa_agent_t, hsa_agent_info_t, void *);
	hsa_status_t (*queue_create)(hsa_agent_t, uint32_t, hsa_queue_type32_t,
				     void (*)(hsa_status_t, hsa_queue_t *, void *), void *,
				     uint32_t, uint32_t, hsa_queue_t **);
	hsa_status_t (*queue_destroy)(hsa_queue_t *);
	uint64_t (*load_write_index_relaxed)(const hsa_queue_t *);
	void (*store_write_index_relaxed)(const hsa_queue_t *, uint64_t);
	uint64_t (*load_read_index_scacquire)(const hsa_queue_t *);
	hsa_status_t (*signal_create)(hsa_signal_value_t, uint32_t, const hsa_agent_t *,
				      hsa_signal_t *);
	hsa_status_t (*signal_destroy)(hsa_signal_t);
	void (*signal_store_relaxed)(hsa_signal_t, hsa_signal_value_t);
	void (*signal_store_screlease)(hsa_signal_t, hsa_signal_value_t);
	hsa_signal_value_t (*signal_wait_scacquire)(hsa_signal_t, hsa_signal_condition_t,
						    hsa_signal_value_t, uint64_t,
						    hsa_wait_state_t);
};

struct hsa_bench {
	struct hsa_fns f;
	hsa_agent_t cpu;
	int initialised;	/* hsa_init() succeeded: hsa_shut_down() at the end */
	char why[256];		/* why the rows are skipped; "" when they run */
	/* The _hsa rows' figures, measured by their _so peers in turn with
	 * their own (rtt: [0] spin, [1] blocked); has_*: done. */
	struct latency rtt[2];
	int has_rtt[2];
	struct rate tput;
	int has_tput;
};

static struct hsa_bench hb;

static int hsa_fail(const char *call, hsa_status_t st)
{
	const char *s = NULL;

	if (hb.f.status_string(st, &s) != HSA_STATUS_SUCCESS || !s)
		s = "?";
	fprintf(stderr, "aql-bench: %s: 0x%x: %s\n", call, (unsigned)st, s);
	return -1;
}

static void *open_lib(void)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	const char *env = getenv("AQL_BENCH_HSA_LIB");
	ssize_t n;
	char *slash;

	if (env && *env)
		return dlopen(env, RTLD_NOW | RTLD_LOCAL);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(path, sizeof(path), "%s/../hsa/" HSA_LIB, self);
			if (access(path, R_OK) == 0)
				return dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	return dlopen(HSA_LIB, RTLD_NOW | RTLD_LOCAL);
}

/* Resolve name into *slot; 0, or -1 with hb.why set. */
static int resolve(void *slot, const char *name)
{
	void *p = dlsym(hb.f.lib, name);

	if (!p) {
		snprintf(hb.why, sizeof(hb.why), "skipped: %s has no %s", HSA_LIB, name);
		return -1;
	}
	memcpy(slot, &p, sizeof(p));
	return 0;
}

static hsa_status_t find_cpu(hsa_agent_t agent, void *data)
{
	hsa_device_type_t type;

	(void)data;
	if (hb.f.agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
	    type == HSA_DEVICE_TYPE_CPU) {
		hb.cpu = agent;
		return HSA_STATUS_INFO_BREAK;
	}
	return HSA_STATUS_SUCCESS;
}

/* Load, check and hsa_init() the library once; 0 when the rows can run. */
static int hsa_setup(void)
{
	static int done, rc;
	const char *build = NULL;
	hsa_status_t st;

	if (done)
		return rc;
	done = 1;
	rc = -1;
	hb.f.lib = open_lib();
	if (!hb.f.lib) {
		snprintf(hb.why, sizeof(hb.why), "skipped: %s", dlerror());
		return rc;
	}
	if (resolve(&hb.f.init, "hsa_init") || resolve(&hb.f.shut_down, "hsa_shut_down") ||
	    resolve(&hb.f.status_string, "hsa_status_string") ||
	    resolve(&hb.f.system_get_info, "hsa_system_get_info") ||
	    resolve(&hb.f.iterate_agents, "hsa_iterate_agents") ||
	    resolve(&hb.f.agent_get_info, "hsa_agent_get_info") ||
	    resolve(&hb.f.queue_create, "hsa_queue_create") ||
	    resolve(&hb.f.queue_destroy, "hsa_queue_destroy") ||
	    resolve(&hb.f.load_write_index_relaxed, "hsa_queue_load_write_index_relaxed") ||
	    resolve(&hb.f.store_write_index_relaxed, "hsa_queue_store_write_index_relaxed") ||
	    resolve(&hb.f.load_read_index_scacquire, "hsa_queue_load_read_index_scacquire") ||
	    resolve(&hb.f.signal_create, "hsa_signal_create") ||
	    resolve(&hb.f.signal_destroy, "hsa_signal_destroy") ||
	    resolve(&hb.f.signal_store_relaxed, "hsa_signal_store_relaxed") ||
	    resolve(&hb.f.signal_store_screlease, "hsa_signal_store_screlease") ||
	    resolve(&hb.f.signal_wait_scacquire, "hsa_signal_wait_scacquire"))
		return rc;
	st = hb.f.init();
	if (st != HSA_STATUS_SUCCESS) {
		snprintf(hb.why, sizeof(hb.why), "skipped: hsa_init: 0x%x", (unsigned)st);
		return rc;
	}
	hb.initialised = 1;
	/* aql's layer names itself here; ROCr's gives its own build string. */
	if (hb.f.system_get_info((hsa_system_info_t)HSA_AMD_SYSTEM_INFO_BUILD_VERSION,
				 &build) != HSA_STATUS_SUCCESS || !build || strcmp(build, "aql")) {
		snprintf(hb.why, sizeof(hb.why), "skipped: %s is not aql's (build %s)", HSA_LIB,
			 build ? build : "?");
		return rc;
	}
	hb.f.iterate_agents(find_cpu, NULL);
	if (!hb.cpu.handle) {
		snprintf(hb.why, sizeof(hb.why), "skipped: %s lists no CPU agent", HSA_LIB);
		return rc;
	}
	rc = 0;
	return rc;
}

/* 0 when the rows run; else res is marked skipped with the reason. */
static int hsa_ready(struct result *res)
{
	if (hsa_setup() == 0)
		return 0;
	res->kind = RESULT_SKIPPED;
	res->skipped = hb.why;
	return 1;
}

static int open_queue(struct ctx *ctx, hsa_queue_t **q, hsa_signal_t *sig)
{
	hsa_status_t st;

	st = hb.f.queue_create(hb.cpu, ctx->queue_size, HSA_QUEUE_TYPE_SINGLE, NULL, NULL,
			       UINT32_MAX, UINT32_MAX, q);
	if (st != HSA_STATUS_SUCCESS)
		return hsa_fail("hsa_queue_create", st);
	st = hb.f.signal_create(1, 0, NULL, sig);
	if (st != HSA_STATUS_SUCCESS) {
		hb.f.queue_destroy(*q);
		return hsa_fail("hsa_signal_create", st);
	}
	return 0;
}

static int close_queue(hsa_queue_t *q, hsa_signal_t sig)
{
	hsa_status_t st = hb.f.signal_destroy(sig), qst = hb.f.queue_destroy(q);

	if (st != HSA_STATUS_SUCCESS)
		return hsa_fail("hsa_signal_destroy", st);
	return qst == HSA_STATUS_SUCCESS ? 0 : hsa_fail("hsa_queue_destroy", qst);
}

/* publish.h's producer through the HSA API: the calls an HSA program makes. */
static uint64_t hsa_load_write(void *q)
{
	return hb.f.load_write_index_relaxed(q);
}

static void hsa_store_write(void *q, uint64_t id)
{
	hb.f.store_write_index_relaxed(q, id);
}

static uint64_t hsa_load_read(void *q)
{
	return hb.f.load_read_index_scacquire(q);
}

static void hsa_ring(void *q, uint64_t id)
{
	hb.f.signal_store_screlease(((hsa_queue_t *)q)->doorbell_signal, (hsa_signal_value_t)id);
}

static const struct publish_ops hsa_ops = {
	hsa_load_write, hsa_store_write, hsa_load_read, hsa_ring,
};

static struct publish_queue hsa_producer(hsa_queue_t *q)
{
	return (struct publish_queue){ .q = q, .ring = (aql_packet *)(uintptr_t)q->base_address,
				       .size = q->size, .read = hsa_load_read(q) };
}

/* One packet; -1 when the ring stays full for WAIT_TIMEOUT_NS. Inlined,
 * as the native rounds' loop is, so that only the HSA calls differ. */
PUBLISH_INLINE int publish(struct publish_queue *pq, const aql_packet *p)
{
	if (!publish_packet(pq, p, &hsa_ops, WAIT_TIMEOUT_NS))
		return 0;
	fprintf(stderr, "aql-bench: HSA queue %llu stays full\n",
		(unsigned long long)((hsa_queue_t *)pq->q)->id);
	return -1;
}

static int await(hsa_signal_t sig, hsa_wait_state_t state)
{
	if (hb.f.signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_LT, 1, WAIT_TIMEOUT_NS,
				       state) < 1)
		return 0;
	fprintf(stderr, "aql-bench: HSA completion signal not reached in %llu ns\n",
		(unsigned long long)WAIT_TIMEOUT_NS);
	return -1;
}

/* samples NULL: warm-up, nothing recorded. */
static int rtt_loop(hsa_queue_t *q, hsa_signal_t sig, hsa_wait_state_t state,
		    uint64_t *samples, uint32_t n)
{
	const aql_packet pkt = empty_dispatch(0, (aql_signal *)(uintptr_t)sig.handle);
	struct publish_queue pq = hsa_producer(q);
	uint64_t t0;

	for (uint32_t i = 0; i < n; i++) {
		hb.f.signal_store_relaxed(sig, 1);
		t0 = now_ns();
		if (publish(&pq, &pkt) || await(sig, state))
			return -1;
		if (samples)
			samples[i] = now_ns() - t0;
	}
	return 0;
}

static int bench_rtt_hsa(struct ctx *ctx, struct result *res, hsa_wait_state_t state,
			 uint32_t n)
{
	uint64_t *samples;
	hsa_queue_t *q;
	hsa_signal_t sig;
	int rc = -1;

	if (hsa_ready(res))
		return 0;
	if (hb.has_rtt[state == HSA_WAIT_STATE_BLOCKED]) {
		res->kind = RESULT_LATENCY;
		res->lat = hb.rtt[state == HSA_WAIT_STATE_BLOCKED];
		return 0;
	}
	samples = alloc_samples(n);
	if (!samples)
		return fail_errno("malloc", ENOMEM);
	if (open_queue(ctx, &q, &sig))
		goto out;
	if (!rtt_loop(q, sig, state, NULL, ctx->sz.warmup) &&
	    !rtt_loop(q, sig, state, samples, n)) {
		res->kind = RESULT_LATENCY;
		latency_stats(samples, n, &res->lat);
		rc = 0;
	}
	if (close_queue(q, sig))
		rc = -1;
out:
	free(samples);
	return rc;
}

int bench_rtt_spin_hsa(struct ctx *ctx, struct result *res)
{
	return bench_rtt_hsa(ctx, res, HSA_WAIT_STATE_ACTIVE, ctx->sz.spin_samples);
}

int bench_rtt_block_hsa(struct ctx *ctx, struct result *res)
{
	return bench_rtt_hsa(ctx, res, HSA_WAIT_STATE_BLOCKED, ctx->sz.block_samples);
}

/* One round: packets back to back, the last one signalling (barrier set). */
static int tput_round(hsa_queue_t *q, hsa_signal_t sig, uint32_t packets, double *rate)
{
	const aql_packet body = empty_dispatch(0, NULL);
	const aql_packet last = empty_dispatch(1, (aql_signal *)(uintptr_t)sig.handle);
	struct publish_queue pq = hsa_producer(q);
	uint64_t t0;

	hb.f.signal_store_relaxed(sig, 1);
	t0 = now_ns();
	for (uint32_t i = 1; i < packets; i++)
		if (publish(&pq, &body))
			return -1;
	if (publish(&pq, &last) || await(sig, HSA_WAIT_STATE_BLOCKED))
		return -1;
	*rate = rate_of(packets, now_ns() - t0);
	return 0;
}

int bench_tput_hsa(struct ctx *ctx, struct result *res)
{
	uint32_t n = ctx->sz.rounds;
	double *rates, warm;
	hsa_queue_t *q;
	hsa_signal_t sig;
	int rc = -1;

	if (hsa_ready(res))
		return 0;
	if (hb.has_tput) {
		res->kind = RESULT_RATE;
		res->rate = hb.tput;
		return 0;
	}
	rates = calloc(n, sizeof(*rates));
	if (!rates)
		return fail_errno("calloc", ENOMEM);
	if (open_queue(ctx, &q, &sig))
		goto out;
	if (!tput_round(q, sig, ctx->sz.packets, &warm)) {
		uint32_t i;

		for (i = 0; i < n && !tput_round(q, sig, ctx->sz.packets, &rates[i]); i++)
			;
		if (i == n) {
			res->kind = RESULT_RATE;
			rate_stats(rates, n, 1, &res->rate);
			rc = 0;
		}
	}
	if (close_queue(q, sig))
		rc = -1;
out:
	free(rates);
	return rc;
}

/*
 * aqlbench-native.so (native_so.c), loaded once the HSA library has
 * brought libaql.so in, so that it binds to that copy. Beside aql-bench in
 * the build, else where meson installs it.
 */
static void *open_native(void)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (n > 0) {
		self[n] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(path, sizeof(path), "%s/" NATIVE_SO, self);
			if (access(path, R_OK) == 0)
				return dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	return dlopen(AQL_BENCH_NATIVE_SO_PATH, RTLD_NOW | RTLD_LOCAL);
}

/*
 * Fixed places for the rows taken in turn. A queue's packet processor is
 * a thread libaql starts when the queue is made, with its maker's CPU
 * mask: unplaced, the native and the HSA queue's processors landed where
 * the scheduler put them, and a run's ratio followed that (0.65 to 1.10
 * on two vCPUs, rounds in turn). So both processors are made on the last
 * CPU and the rounds submitted from the first; unplace() puts the
 * thread's mask back. Nothing is placed with fewer than two CPUs, nor
 * the throughput rounds of --contention (both runs): as for aql-bench's
 * own throughput rows, where a producer and its processor run beside busy
 * threads is the scheduler's choice, which a user gets too (the runtime
 * does not move its threads: docs/benchmarks.md, "The moves withdrawn").
 * Round trips stay placed (apart, as a polled wait wants).
 */
static cpu_set_t unplaced;

static void place_on(int last)
{
	cpu_set_t one;
	int cpu = -1;

	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &unplaced) && (cpu < 0 || last))
			cpu = i;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof(one), &one);
}

/* Where processors are made next, if place; 0 placed, -1 not. */
static int place_processors(int place)
{
	if (!place || sched_getaffinity(0, sizeof(unplaced), &unplaced) ||
	    CPU_COUNT(&unplaced) < 2)
		return -1;
	place_on(1);
	return 0;
}

static void place_submitter(int placed)
{
	if (placed == 0)
		place_on(0);
}

static void unplace(int placed)
{
	if (placed == 0)
		sched_setaffinity(0, sizeof(unplaced), &unplaced);
}

struct native_fns {
	void *(*open)(uint32_t queue_size, uint32_t packets);
	int (*round)(void *n, uint32_t packets, double *rate);
	int (*rtt)(void *n, int hint, uint64_t *samples, uint32_t count);
	void (*close)(void *n);
};

/* aqlbench-native.so's entry points; 0, or -1 with res skipped saying why. */
static int native_get(struct native_fns *fn, struct result *res)
{
	static struct native_fns got;
	static int done;

	if (!done) {
		void *lib = open_native();

		done = 1;
		*(void **)&got.open = lib ? dlsym(lib, "aql_bench_native_open") : NULL;
		*(void **)&got.round = lib ? dlsym(lib, "aql_bench_native_round") : NULL;
		*(void **)&got.rtt = lib ? dlsym(lib, "aql_bench_native_rtt") : NULL;
		*(void **)&got.close = lib ? dlsym(lib, "aql_bench_native_close") : NULL;
		if (!got.open || !got.round || !got.rtt || !got.close) {
			snprintf(hb.why, sizeof(hb.why), "skipped: no " NATIVE_SO " (%s)",
				 dlerror());
			got.open = NULL;
		}
	}
	if (!got.open) {
		res->kind = RESULT_SKIPPED;
		res->skipped = hb.why;
		return -1;
	}
	*fn = got;
	return 0;
}

/*
 * The round trips of dispatch_rtt_spin (ACTIVE) or dispatch_rtt_spin_block
 * (BLOCKED) on libaql.so, in blocks taken in turn with the HSA path's, the
 * first of each pair alternating, as the throughput rounds are: this
 * row's figure, and the _hsa row's, kept for it.
 */
static int bench_rtt_so(struct ctx *ctx, struct result *res, hsa_wait_state_t state, uint32_t n)
{
	const int blocked = state == HSA_WAIT_STATE_BLOCKED;
	const uint32_t blocks = n < 16 ? 1 : 16, per = n / blocks;
	uint64_t *so = alloc_samples(n), *hs = alloc_samples(n);
	struct native_fns fn;
	void *native = NULL;
	hsa_queue_t *q = NULL;
	hsa_signal_t sig;
	int rc = -1, placed = -1;

	if (hsa_ready(res) || native_get(&fn, res)) {
		rc = 0;
		goto out;
	}
	if (!so || !hs) {
		rc = fail_errno("malloc", ENOMEM);
		goto out;
	}
	placed = place_processors(1);
	native = fn.open(ctx->queue_size, 1);
	if (!native) {
		rc = fail_msg("aql_bench_native_open", AQL_ERR_DEVICE, "no queue (see above)");
		goto out;
	}
	if (open_queue(ctx, &q, &sig))
		goto out;
	place_submitter(placed);
	rc = fn.rtt(native, blocked ? AQL_WAIT_SPIN_BLOCK : AQL_WAIT_ACTIVE, NULL,
		    ctx->sz.warmup) || rtt_loop(q, sig, state, NULL, ctx->sz.warmup);
	for (uint32_t b = 0; b < blocks && !rc; b++) {
		uint64_t *mine = so + b * per, *theirs = hs + b * per;
		int hint = blocked ? AQL_WAIT_SPIN_BLOCK : AQL_WAIT_ACTIVE;

		rc = b % 2 ? rtt_loop(q, sig, state, theirs, per) || fn.rtt(native, hint, mine, per)
			   : fn.rtt(native, hint, mine, per) || rtt_loop(q, sig, state, theirs, per);
	}
	if (close_queue(q, sig))
		rc = -1;
	if (!rc) {
		res->kind = RESULT_LATENCY;
		latency_stats(so, (size_t)per * blocks, &res->lat);
		latency_stats(hs, (size_t)per * blocks, &hb.rtt[blocked]);
		hb.has_rtt[blocked] = 1;
	}
	rc = rc ? -1 : 0;
out:
	if (native)
		fn.close(native);
	unplace(placed);
	free(so);
	free(hs);
	return rc;
}

int bench_rtt_spin_so(struct ctx *ctx, struct result *res)
{
	return bench_rtt_so(ctx, res, HSA_WAIT_STATE_ACTIVE, ctx->sz.spin_samples);
}

int bench_rtt_spin_block_so(struct ctx *ctx, struct result *res)
{
	return bench_rtt_so(ctx, res, HSA_WAIT_STATE_BLOCKED, ctx->sz.block_samples);
}

/*
 * One round of aqlbench-native.so and one of the HSA path, the first as
 * given, each on a queue made for it (processors placed, both warmed up
 * with a round): 0, or -1 having said why.
 */
static int tput_pair(struct ctx *ctx, const struct native_fns *fn, int hsa_first, double *so,
		     double *hsa)
{
	uint32_t packets = ctx->sz.packets;
	int placed = place_processors(!ctx->opts->contention);
	/* Warmed up below, from the submitter's CPU, not the processors'. */
	void *native = fn->open(ctx->queue_size, 1);
	hsa_queue_t *q = NULL;
	hsa_signal_t sig;
	double warm;
	int rc = -1;

	if (!native) {
		unplace(placed);
		return fail_msg("aql_bench_native_open", AQL_ERR_DEVICE, "no queue (see above)");
	}
	if (open_queue(ctx, &q, &sig))
		goto out;
	place_submitter(placed);
	rc = tput_round(q, sig, packets, &warm) || fn->round(native, packets, &warm) ||
	     (hsa_first ? tput_round(q, sig, packets, hsa) || fn->round(native, packets, so)
			: fn->round(native, packets, so) || tput_round(q, sig, packets, hsa));
	if (close_queue(q, sig))
		rc = -1;
out:
	fn->close(native);
	unplace(placed);
	return rc ? -1 : 0;
}

/*
 * Rounds of aqlbench-native.so and of the HSA path in turn, so that a
 * slower or busier moment falls on both: this row's figure, and
 * dispatch_throughput_hsa's for bench_tput_hsa. Each pair runs on queues
 * made for it: where a queue's ring and signals land set its rate for as
 * long as it lives (one HSA queue ran 7.1 to 7.6 M/s over a run, its
 * native peer 9.5 to 11.5, and the next run the other way round), so the
 * rounds sample many placements for both paths rather than one, three
 * pairs for each of the other rows' rounds.
 */
#define TPUT_PAIRS(ctx) (3 * (ctx)->sz.rounds)

static int tput_in_turn(struct ctx *ctx, const struct native_fns *fn, uint32_t pairs,
			double *so, double *hsa)
{
	/* Which goes first alternates: on two busy vCPUs the order alone
	 * moved the median ratio by about 5 % (docs/hsa.md). */
	for (uint32_t i = 0; i < pairs; i++)
		if (tput_pair(ctx, fn, i % 2, &so[i], &hsa[i]))
			return -1;
	return 0;
}

int bench_tput_so(struct ctx *ctx, struct result *res)
{
	struct native_fns fn;
	uint32_t n = TPUT_PAIRS(ctx);
	double *so, *hsa;
	int rc = -1;

	if (hsa_ready(res) || native_get(&fn, res))
		return 0;
	so = calloc(n, sizeof(*so));
	hsa = calloc(n, sizeof(*hsa));
	if (!so || !hsa) {
		rc = fail_errno("calloc", ENOMEM);
	} else if (tput_in_turn(ctx, &fn, n, so, hsa) == 0) {
		res->kind = RESULT_RATE;
		rate_stats(so, n, 1, &res->rate);
		rate_stats(hsa, n, 1, &hb.tput);
		hb.has_tput = 1;
		rc = 0;
	}
	free(so);
	free(hsa);
	return rc;
}

void bench_hsa_cleanup(void)
{
	if (hb.initialised)
		hb.f.shut_down();
	hb.initialised = 0;
}
