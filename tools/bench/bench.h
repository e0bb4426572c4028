/* SPDX-License-Identifier: MIT */
/*
 * aql-bench internals shared by its modes. A mode (dispatch.c, load.c, ...)
 * is a list of benchmarks, each filling one struct result, plus the goals
 * judged on those results; the driver (aql-bench.c) runs one mode and
 * report.c prints its results as a table or as JSON lines.
 */
#ifndef AQL_BENCH_H
#define AQL_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <aql/aql.h>

#include "empty.h"
#include "util/sanitizer.h"

#define ARRAY_SIZE(a)		(sizeof(a) / sizeof((a)[0]))

/* How long a wait for work lasts before the work is called lost (longer
 * in sanitized builds). */
#define WAIT_TIMEOUT_NS		AQL_WORK_TIMEOUT_NS
#define DEFAULT_THREADS		8u
#define MAX_THREADS		1024u
#define MAX_BENCHES		48
/* Exit status of a mode whose device is absent (meson's skip). */
#define BENCH_SKIP		77
#define COMGR_DEFAULT_LIB	"libamd_comgr.so.2"

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

struct opts {
	bool json;
	bool quick;
	uint32_t threads;
	uint32_t contention;	/* busy threads of --contention, 0: none */
	const char *mode;	/* "dispatch", "load", "read", "channel", "cuda", "amd", "mpi" */
	const char *path;	/* the FILE of --load and --read, or NULL */
	const char *plot;	/* the DIR of --plot, or NULL */
};

enum result_kind {
	RESULT_NONE,
	RESULT_LATENCY,
	RESULT_RATE,
	RESULT_DURATION,
	RESULT_SKIPPED,
};

/* Points of a latency's distribution kept for --plot: p0 (min) to p99 by
 * 1 %, then p99.9 and p100 (max); see latency_cdf_p(). */
#define LATENCY_CDF		102

struct latency {
	uint64_t min, p50, p99, p999;
	double mean;
	size_t samples;
	uint64_t cdf[LATENCY_CDF];	/* nearest-rank values at latency_cdf_p(i) */
};

struct rate {
	const char *unit;	/* NULL: "dispatches/s" */
	double median, min, max;
	uint32_t rounds;
	uint32_t threads;
};

/* Per-round times, in unit. */
struct duration {
	const char *unit;	/* "ms", "us/kernel" */
	double median, p90, min, max;
	uint32_t rounds;
	uint32_t reps;		/* repetitions timed together per round */
	uint32_t kernels;	/* in the code object (--load) */
};

struct result {
	const char *metric;
	const char *peer;	/* the bench's peer row, or NULL */
	enum result_kind kind;
	/* --contention: xcpu_rtt_ns() right before and right after the row
	 * (0: not taken), the machine it ran on (aql-bench.c). */
	uint64_t xcpu_ns[2];
	union {
		struct latency lat;
		struct rate rate;
		struct duration dur;
		const char *skipped;	/* why, for RESULT_SKIPPED */
	};
};

struct ctx {
	const struct opts *opts;
	struct sizes sz;
	aql_agent *agent;
	uint32_t queue_size;
	struct result results[MAX_BENCHES];
	size_t nresults;
	void *state;		/* the mode's own, from its setup() */
	/* Set by a mode's setup: why its goals get no verdict (an emulated
	 * device), printed in place of ok/MISSED; NULL judges them. */
	const char *no_verdict;
	/* Set by a mode's setup: this process prints no results (an MPI
	 * rank other than 0, the peer of rank 0's rows). */
	bool quiet;
};

typedef int (*bench_fn)(struct ctx *ctx, struct result *res);

struct bench {
	const char *metric;
	bench_fn run;
};

/* A row and the row it is read against (the JSON's "peer", --plot). */
struct peer {
	const char *metric;
	const char *peer;
};

/* A goal: num's headline value, divided by den's unless den is NULL. */
struct goal {
	const char *metric;
	const char *label;
	const char *num;
	const char *den;
	bool at_least;
	double goal;
	const char *unit;	/* of an absolute goal (den NULL) */
};

/*
 * A mode is a list of benchmarks run in order plus the goals judged on
 * their results, with optional set-up (run before the banner) and
 * clean-up.
 */
struct mode {
	const char *name;
	const struct bench *benches;
	size_t nbenches;
	const struct goal *goals;
	size_t ngoals;
	const struct peer *peers;	/* beyond the goals' num/den pairs */
	size_t npeers;
	int (*setup)(struct ctx *ctx);
	void (*cleanup)(struct ctx *ctx);
	int (*banner)(const struct ctx *ctx);
};

/* mem.c: the pool sub-allocator, part of the default mode. */
int bench_alloc_free(struct ctx *ctx, struct result *res);
int bench_baseline_malloc_free(struct ctx *ctx, struct result *res);

/* launch.c: typed launches, part of the default mode. */
int bench_launch_raw(struct ctx *ctx, struct result *res);
int bench_launch_typed(struct ctx *ctx, struct result *res);
int bench_launch_overhead(struct ctx *ctx, struct result *res);

/*
 * graph.c: a chain of launches recorded once and replayed, against the
 * same launches one by one. launch(user, q, done) makes the chain's
 * launches on q (recorded while q records), the last completing done.
 * graph_measure() records it, then fills host[] (host ns per launch, the
 * queue held by a barrier meanwhile) and whole[] (one chain to its
 * completion), each replay, one by one, overhead as pair_rounds(). 0, or
 * -1 having said why.
 */
typedef aql_status (*graph_chain_fn)(void *user, aql_queue *q, aql_completion *done);
int graph_measure(aql_queue *q, graph_chain_fn launch, void *user, uint32_t launches,
		  uint32_t rounds, struct latency host[3], struct latency whole[3]);
/* The default mode's rows of it. */
int bench_graph_replay_host(struct ctx *ctx, struct result *res);
int bench_graph_individual_host(struct ctx *ctx, struct result *res);
int bench_graph_chain(struct ctx *ctx, struct result *res);
int bench_graph_chain_individual(struct ctx *ctx, struct result *res);

/* speed.c: kernels at loop speed on the CPU agent, part of the default mode. */
int bench_plainc_stencil(struct ctx *ctx, struct result *res);
int bench_kernel_stencil(struct ctx *ctx, struct result *res);
int bench_plainc_compute(struct ctx *ctx, struct result *res);
int bench_kernel_compute(struct ctx *ctx, struct result *res);
int bench_openmp_compute(struct ctx *ctx, struct result *res);
int bench_kernel_compute_all(struct ctx *ctx, struct result *res);

/*
 * dispatch.c: the p50 of a spinning cache-line ping-pong between the first
 * and the last CPU the caller may run on (a few milliseconds); 0 with
 * fewer than two CPUs or on a failure. The caller's mask is kept.
 */
uint64_t xcpu_rtt_ns(void);

/*
 * stats.c: whether the n cross-CPU round trips of xcpu_rtt_ns() show one
 * machine: all taken, the largest at most XCPU_SAME times the smallest; or
 * none taken (one CPU: no hand-off crosses CPUs).
 * On a virtual machine it moved between 80-150 ns and 480-530 ns, for
 * seconds at a time, whatever ran (aql-bench.c, run_mode()).
 */
#define XCPU_SAME 2.0
bool xcpu_same(const uint64_t *ns, size_t n);

/*
 * dispatch.c: wait for sig < 1 (10 s at most); on a timeout say whether
 * q stopped or where its indices stand. 0 or -1.
 */
int await_done(aql_queue *q, aql_signal *sig, enum aql_wait_hint hint);
/* Hold q behind a barrier on gate (stored 1) until gate is stored 0, so
 * that what is submitted meanwhile only queues. 0, or -1 having said why. */
int queue_hold(aql_queue *q, aql_signal *gate);

#ifdef AQL_BENCH_HSA
int bench_rtt_spin_hsa(struct ctx *ctx, struct result *res);
int bench_rtt_spin_so(struct ctx *ctx, struct result *res);
int bench_rtt_spin_block_so(struct ctx *ctx, struct result *res);
int bench_tput_so(struct ctx *ctx, struct result *res);
int bench_rtt_block_hsa(struct ctx *ctx, struct result *res);
int bench_tput_hsa(struct ctx *ctx, struct result *res);
/* hsa_shut_down() of the library the HSA rows loaded, if they did. */
void bench_hsa_cleanup(void);
#endif

extern const struct mode bench_mode_dispatch;
extern const struct mode bench_mode_load;
extern const struct mode bench_mode_read;
extern const struct mode bench_mode_channel;
extern const struct mode bench_mode_cuda;
extern const struct mode bench_mode_amd;
extern const struct mode bench_mode_mpi;

/*
 * channel.c: the checked message layout that the channel and its DPDK
 * peer carry (bytes a multiple of 8, 24..64). chan_msg_check() returns -1
 * on a wrong size, producer, sequence number or checksum, and keeps why.
 */
struct chan_check;
void chan_msg_fill(uint64_t *w, uint32_t bytes, uint32_t producer, uint32_t seq);
int chan_msg_check(struct chan_check *c, const void *data, uint32_t bytes);

#ifdef AQL_BENCH_DPDK
/* channel_dpdk.c: rte_ring. probe fills why if the peer cannot run. */
int chan_dpdk_probe(char *why, size_t len);
const char *chan_dpdk_version(void);
/*
 * producers threads send per messages each, checked by c, on an MP/SC
 * (multi) or SP/SC ring; spin: wait on a full or empty ring with rte_pause
 * alone, else back off to sched_yield. *ns from the start to the last,
 * or to limit_ns, whichever is first; *received: how many arrived by then.
 */
int chan_dpdk_round(uint32_t producers, uint32_t per, bool multi, bool spin,
		    uint64_t limit_ns, struct chan_check *c, uint64_t *ns, uint64_t *received);
#endif

/* stats.c: progress line, failure messages, timing and summaries. */
extern bool progress_on;
void progress(size_t k, size_t n, const char *name);
void progress_clear(void);
int fail_msg(const char *call, aql_status st, const char *msg);
/* aql_error_message() is per thread: call this on the failing thread. */
int fail(const char *call, aql_status st);
int fail_errno(const char *call, int err);
uint64_t *alloc_samples(uint32_t n);
double rate_of(uint64_t items, uint64_t ns);
void latency_stats(uint64_t *samples, size_t n, struct latency *out);
/* The cumulative fraction of point i of struct latency's cdf (0 to 1). */
double latency_cdf_p(unsigned i);
/* Sample i of a raw/typed pair in whole ns, and the typed path's overhead
 * over the raw one (0 when it was faster). */
void pair_sample(uint64_t *raw, uint64_t *typed, uint64_t *over, size_t i,
		 double r, double t);
/*
 * The raw/typed pair benches: round(user, &raw_ns, &typed_ns) warmup + n
 * times, the first warmup discarded, summed up in out[0] (raw), out[1]
 * (typed) and out[2] (typed's overhead). 0, or -1 having said why.
 */
int pair_rounds(uint32_t n, uint32_t warmup, int (*round)(void *user, double *r, double *t),
		void *user, struct latency out[3]);
/*
 * Copy bandwidth: once(user) rounds + 1 times (the first warms up), each
 * moving bytes; GB/s per call summed up in res. 0, or -1 having said why.
 */
int transfer_rounds(uint32_t rounds, size_t bytes, int (*once)(void *user), void *user,
		    struct result *res);
/* Throughput: the same, each call doing items; items/s (unit) per call. */
int rate_rounds(uint32_t rounds, uint64_t items, const char *unit, int (*once)(void *user),
		void *user, struct result *res);
/* A bench that is fn(res, arg): one measurement, several rows. */
#define BENCH_OF(name, fn, arg)						\
	static int name(struct ctx *ctx, struct result *res)		\
	{								\
		(void)ctx;						\
		return fn(res, arg);					\
	}
/* A bench that reports what an earlier one of the same run measured. */
#define LATENCY_ROW(name, measured)					\
	static int name(struct ctx *ctx, struct result *res)		\
	{								\
		(void)ctx;						\
		res->kind = RESULT_LATENCY;				\
		res->lat = (measured);					\
		return 0;						\
	}
void rate_stats(double *rates, uint32_t n, uint32_t threads, struct rate *out);
void duration_stats(double *v, uint32_t n, const char *unit, uint32_t reps,
		    uint32_t kernels, struct duration *out);
/* Whole file into a fresh buffer; the caller frees *out. errno on failure. */
int slurp(const char *path, unsigned char **out, size_t *size);
int read_fail(const char *path, int err);

/* report.c */
void print_json(const struct ctx *ctx, const struct mode *m);
void print_table(const struct ctx *ctx, const struct mode *m);
/* --contention n: both runs, then each row's busy/idle ratio. */
void print_contention(const struct ctx *idle, const struct ctx *busy,
		      const struct mode *m, uint32_t n, bool json);

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

#endif
