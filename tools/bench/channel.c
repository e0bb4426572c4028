/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --channel: device-to-host channels (aql/channel.h), with
 * DPDK's rte_ring measured in the same run when aql-bench was built with
 * libdpdk (channel_dpdk.c).
 *
 * Producers are work-items of the kernels in channel_kernels.c, one per
 * work-group, on a private CPU agent (aql_host_agent_create()) whose
 * workers number the producers: 8 producers are 8 threads, whatever the
 * core count. The consumer is this thread: aql_channel_drain() into a
 * callback, and aql_channel_wait() when the channel is empty. Every
 * message is checked as it arrives (its producer's next sequence number,
 * its ticket the one after the last, a checksum of its words) and every
 * round must deliver exactly what was sent, so a broken channel fails the
 * run instead of reporting a rate.
 *
 * chan_mpsc_1p, chan_mpsc_2p, chan_mpsc_8p
 *	64-byte messages: one 64-byte slot each, an 8-byte header and 56
 *	payload bytes; a 4096-slot ring (the default). 1, 2 or 8 producers
 *	share MSGS messages per round (1 Mi, --quick 64 Ki), each sending
 *	its share with sequence numbers 0, 1, ... The producers of a round
 *	start together: each announces itself in host memory and waits
 *	(spin, then yield) for the bench's go, given once all are there.
 *	Timed from the go to the last message received; msgs/s, median
 *	over the rounds after one warm-up round.
 *
 * chan_mpsc_1p_slot128
 *	As chan_mpsc_1p with 128-byte slots, so that one slot carries a
 *	whole 64-byte payload (72 bytes with the header).
 *
 * dpdk_ring_spsc, dpdk_ring_mpsc_1p, dpdk_ring_mp_8p (with libdpdk)
 *	rte_ring with 64-byte elements (the rte_ring_*_elem API, esize 64,
 *	each element a 64-byte payload in the same checked layout: the same
 *	64 bytes per message through the ring as the channel's slot), 4096
 *	entries (4095 usable), set up with rte_ring_init() on memory
 *	allocated here: no EAL, no huge pages. SP/SC: one producer thread
 *	enqueuing one element per call (as a send is one message), this
 *	thread dequeuing bursts of up to 32 (as a drain takes what is
 *	there); a side that finds the ring full or empty backs off as the
 *	channel's senders do (rte_pause a few times, then sched_yield).
 *	mpsc_1p: the same with a multi-producer enqueue (a compare-and-swap
 *	on the head per element, as a channel send is a fetch-add): the
 *	like-for-like peer of chan_mpsc_1p, and goal 1's. mp_8p: the MP/SC
 *	ring, 8 producer threads, unpinned as the agent's workers are. The
 *	same message count and checks as the channel, but a round stops
 *	after 2 s (--quick 0.5 s): the MP ring with 8 producers on 2 cores
 *	can stall for minutes behind a preempted producer (the others spin
 *	inside rte_ring until it moves the tail), and its rate is then what
 *	arrived by the limit (a note after the tables says how often).
 *
 * dpdk_ring_spsc_spin, dpdk_ring_mp_8p_spin
 *	The same with both sides waiting on rte_pause() alone, the usual
 *	DPDK loop, which assumes a core of its own per thread: on 2 shared
 *	cores the SP/SC figure swings with where the scheduler puts the two
 *	spinning threads, and MP/SC collapses.
 *
 *	Every round runs the channel and its peers (chan_mpsc_1p with the
 *	1-producer ones, chan_mpsc_8p with the 8-producer ones), the first
 *	rotating, so that a noisy spell of this machine hits them alike.
 *
 * chan_latency_ns
 *	Send to receive, unloaded: one producer sends a message carrying its
 *	send time and spins until the consumer, on receiving it, stores its
 *	sequence number + 1 to a word of host memory; then the next. The
 *	consumer drains, and waits when empty, as above. Times are the time
 *	stamp counter (rdtscp on x86-64, cntvct_el0 on arm64), read inline
 *	by the kernel (a host code object cannot call libc) and by the
 *	consumer, converted with a rate calibrated against CLOCK_MONOTONIC
 *	when the mode starts. The two reads are on different cores: this
 *	trusts the counter to be synchronised between them, as an invariant
 *	TSC is (the banner says what /proc/cpuinfo claims).
 *
 * chan_latency_poll_ns
 *	The same with a consumer that only drains, spinning between drains.
 *
 * chan_latency_wake_ns
 *	The same with 300 us between one acknowledgement and the next
 *	send, so that the consumer is asleep in aql_channel_wait() each
 *	time: the empty-to-non-empty wake (an eventfd write and a ppoll
 *	return) is in every sample.
 *
 * chan_ack_rtt_ns
 *	From the chan_latency_ns run: send to the producer seeing the
 *	acknowledgement, both times read on the producer's thread (no
 *	cross-core clock), a check on the one-way figures.
 *
 * After the tables, the channel's own statistics per metric (full waits,
 * wake-ups) and how much of each round the producers' send loops
 * overlapped: whether they really ran at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MSGS_FULL	(1u << 20)
#define MSGS_QUICK	(1u << 16)
#define LAT_WARMUP	1000u
#define WAKE_GAP_NS	300000u
#define ROUND_LIMIT_NS	(60ull * 1000000000ull)
#define POLL_NS		20000000ull	/* a wait's slice: then look at the kernel */
#define MAX_PRODUCERS	8u
/*
 * The CPU agent runs grids of up to 64 work-items on its packet
 * processor's thread, one group after another; a larger grid goes to its
 * workers. chan_produce's work-items past the producers return at once.
 */
#define PRODUCE_GRID	128u
#define DPDK_LIMIT_NS	(2ull * 1000000000ull)
#define DPDK_LIMIT_QUICK_NS	(500ull * 1000000ull)
#define CHAN_MAX_WORDS	8u

extern const unsigned char aql_bench_channel_kernels[];
extern const size_t aql_bench_channel_kernels_size;

/* The message layout of channel_kernels.c; keep the two in step. */
#define CHAN_WORD(w0, i) ((w0) * 0x9e3779b97f4a7c15ull + (i))
#define CHAN_CHECK_STEP(h, x) (((h) ^ (x)) * 0x100000001b3ull)
#define CHAN_CHECK_SEED 0xcbf29ce484222325ull

struct chan_check {
	uint32_t producers, bytes;
	uint32_t next[MAX_PRODUCERS];	/* the seq each producer sends next */
	uint64_t received;
	uint64_t ticket;		/* the next ticket (channel only) */
	uint32_t slot_size;		/* 0: no tickets (DPDK) */
	/* Latency runs: the consumer's answer and the samples. */
	uint32_t *ack;
	uint64_t *lat;
	uint32_t lat_skip, lat_n;
	char err[256];
};

/* What a channel metric saw, printed after the tables. */
struct chan_note {
	const char *metric;
	uint32_t rounds;
	uint64_t msgs;			/* per round */
	aql_channel_stats stats;	/* over all its rounds, warm-up included */
	double overlap_med, overlap_min;	/* producers' spans / round */
};

enum {
	R_1P, R_2P, R_8P, R_1P_128,
	R_DPDK_SPSC, R_DPDK_SPSC_SPIN, R_DPDK_MPSC, R_DPDK_MP8, R_DPDK_MP8_SPIN, NRATES
};

#define MAX_PEERS	3

struct chan_state {
	double ns_per_tick;
	uint32_t msgs;
	char tsc_flags[64];
	bool have_rate[NRATES];
	uint32_t limited[NRATES];	/* DPDK rounds stopped at the limit */
	struct rate rates[NRATES];
	struct latency lat_rtt;
	bool have_rtt;
	struct chan_note notes[12];
	size_t nnotes;
	char dpdk_why[160];	/* non-empty: the peer is skipped */
};

static struct chan_state the_chan_state;

static struct chan_state *state_of(const struct ctx *ctx)
{
	return ctx->state;
}

static inline uint64_t ticks(void)
{
#if defined(__x86_64__)
	uint32_t aux;

	return __builtin_ia32_rdtscp(&aux);
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
	return v;
#else
	return now_ns();
#endif
}

/* ---- the checked message layout (shared with channel_dpdk.c) --------- */

void chan_msg_fill(uint64_t *w, uint32_t bytes, uint32_t producer, uint32_t seq)
{
	uint32_t n = bytes / 8;
	uint64_t h = CHAN_CHECK_SEED;

	w[0] = (uint64_t)producer | (uint64_t)seq << 32;
	w[1] = 0;
	h = CHAN_CHECK_STEP(h, w[0]);
	for (uint32_t i = 2; i + 1 < n; i++) {
		w[i] = CHAN_WORD(w[0], i);
		h = CHAN_CHECK_STEP(h, w[i]);
	}
	w[n - 1] = h;
}

static int check_fail(struct chan_check *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int check_fail(struct chan_check *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->err[0]) {
		va_start(ap, fmt);
		vsnprintf(c->err, sizeof(c->err), fmt, ap);
		va_end(ap);
	}
	return -1;
}

int chan_msg_check(struct chan_check *c, const void *data, uint32_t bytes)
{
	uint64_t w[CHAN_MAX_WORDS], h = CHAN_CHECK_SEED;
	uint32_t n = bytes / 8, p, seq;

	if (bytes != c->bytes)
		return check_fail(c, "message %" PRIu64 " has %u bytes, not %u", c->received,
				  bytes, c->bytes);
	memcpy(w, data, bytes);
	p = (uint32_t)w[0];
	seq = (uint32_t)(w[0] >> 32);
	if (p >= c->producers)
		return check_fail(c, "message %" PRIu64 " names producer %u of %u", c->received,
				  p, c->producers);
	if (seq != c->next[p])
		return check_fail(c, "message %" PRIu64 " from producer %u has seq %u, expected %u"
				  " (lost, duplicated or out of order)", c->received, p, seq,
				  c->next[p]);
	h = CHAN_CHECK_STEP(h, w[0]);
	for (uint32_t i = 2; i + 1 < n; i++) {
		if (w[i] != CHAN_WORD(w[0], i))
			return check_fail(c, "producer %u seq %u: word %u is %#" PRIx64
					  ", expected %#" PRIx64, p, seq, i, w[i],
					  (uint64_t)CHAN_WORD(w[0], i));
		h = CHAN_CHECK_STEP(h, w[i]);
	}
	if (w[n - 1] != h)
		return check_fail(c, "producer %u seq %u: checksum %#" PRIx64 ", expected %#"
				  PRIx64, p, seq, w[n - 1], h);
	c->next[p]++;
	c->received++;
	return 0;
}

static void check_reset(struct chan_check *c, uint32_t producers, uint32_t bytes)
{
	c->producers = producers;
	c->bytes = bytes;
	memset(c->next, 0, sizeof(c->next));
	c->received = 0;
	c->err[0] = 0;
}

/* Every producer delivered exactly per messages. */
static int check_done(struct chan_check *c, uint32_t per)
{
	for (uint32_t p = 0; p < c->producers; p++)
		if (c->next[p] != per)
			return check_fail(c, "producer %u delivered %u of %u messages", p,
					  c->next[p], per);
	return 0;
}

/* ---- one channel set-up: agent, queue, kernels, channel --------------- */

struct chan_run {
	aql_agent *agent;
	aql_queue *q;
	aql_code_object *co;
	const aql_kernel *produce, *ping;
	aql_channel *ch;
	uint32_t producers, slot_size, bytes;
	uint64_t spans[2 * MAX_PRODUCERS];
	uint32_t sync[2];		/* producers arrived; go */
	uint32_t fails;
	uint32_t ack;		/* chan_ping's acknowledgement */
	bool stuck;		/* a kernel still runs: leave the agent be */
	struct chan_check check;
};

static void run_close(struct chan_run *r)
{
	if (r->stuck)
		return;
	aql_channel_destroy(r->ch);
	aql_queue_destroy(r->q);
	aql_code_object_destroy(r->co);
	aql_agent_destroy(r->agent);
	r->ch = NULL;
	r->q = NULL;
	r->co = NULL;
	r->agent = NULL;
}

static int run_open(struct chan_run *r, uint32_t producers, uint32_t slot_size, uint32_t bytes)
{
	aql_host_agent_config ac = { .workers = producers };
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };
	aql_channel_config cc = { .slot_size = slot_size };
	aql_status st;
	const char *what = "aql_host_agent_create";

	memset(r, 0, sizeof(*r));
	r->producers = producers;
	r->slot_size = slot_size;
	r->bytes = bytes;
	st = aql_host_agent_create(&ac, &r->agent);
	if (st == AQL_OK && (what = "aql_code_object_load"))
		st = aql_code_object_load(r->agent, aql_bench_channel_kernels,
					  aql_bench_channel_kernels_size, NULL, &r->co);
	if (st == AQL_OK && (what = "aql_code_object_kernel chan_produce"))
		st = aql_code_object_kernel(r->co, "chan_produce", &r->produce);
	if (st == AQL_OK && (what = "aql_code_object_kernel chan_ping"))
		st = aql_code_object_kernel(r->co, "chan_ping", &r->ping);
	if (st == AQL_OK && (what = "aql_queue_create"))
		st = aql_queue_create(r->agent, &qc, &r->q);
	if (st == AQL_OK && (what = "aql_channel_create"))
		st = aql_channel_create(r->agent, &cc, &r->ch);
	if (st != AQL_OK) {
		fail(what, st);
		run_close(r);
		return -1;
	}
	return 0;
}

static int on_message(const aql_channel_msg *m, void *arg)
{
	struct chan_check *c = arg;

	if (m->kind != AQL_CHANNEL_KIND_DATA)
		return check_fail(c, "ticket %" PRIu64 ": kind %u, not data", m->ticket, m->kind);
	if (m->ticket != c->ticket)
		return check_fail(c, "ticket %" PRIu64 " arrived, expected %" PRIu64, m->ticket,
				  c->ticket);
	c->ticket += m->size + AQL_CHANNEL_HDR_BYTES <= c->slot_size ? 1
		     : AQL_CHANNEL_SLOTS(m->size, c->slot_size);
	return chan_msg_check(c, m->data, m->size);
}

static int round_fail(struct chan_run *r, const char *what)
{
	progress_clear();
	fprintf(stderr, "aql-bench: channel with %u producer%s: %s\n", r->producers,
		r->producers == 1 ? "" : "s", what);
	return -1;
}

/*
 * Drain until c has `total` messages, waiting when empty, failing if done
 * completes first (messages lost) or the round takes too long.
 */
static int consume(struct chan_run *r, aql_completion done, uint64_t total, bool poll,
		   aql_channel_fn fn)
{
	struct chan_check *c = &r->check;
	uint64_t t0 = now_ns();
	uint32_t n;
	aql_status st;
	char msg[200];

	while (c->received < total) {
		st = aql_channel_drain(r->ch, 0, fn, c, &n);
		if (st != AQL_OK)
			return fail("aql_channel_drain", st);
		if (c->err[0])
			return round_fail(r, c->err);
		if (n)
			continue;
		if (poll) {
			cpu_relax();
			if ((c->received & 0xff) || now_ns() - t0 < ROUND_LIMIT_NS)
				continue;
		} else {
			st = aql_channel_wait(r->ch, POLL_NS);
			if (st == AQL_OK)
				continue;
			if (st != AQL_ERR_TIMEOUT)
				return fail("aql_channel_wait", st);
		}
		if (aql_completion_done(done)) {
			/* Anything still there was published before the end. */
			st = aql_channel_drain(r->ch, 0, fn, c, &n);
			if (st != AQL_OK)
				return fail("aql_channel_drain", st);
			if (c->err[0])
				return round_fail(r, c->err);
			if (c->received == total)
				break;
			snprintf(msg, sizeof(msg), "the kernel ended with %" PRIu64 " of %" PRIu64
				 " messages received (%u sends failed)", c->received, total,
				 __atomic_load_n(&r->fails, __ATOMIC_RELAXED));
			return round_fail(r, msg);
		}
		if (now_ns() - t0 > ROUND_LIMIT_NS) {
			snprintf(msg, sizeof(msg), "%" PRIu64 " of %" PRIu64 " messages after %llu s",
				 c->received, total, ROUND_LIMIT_NS / 1000000000ull);
			return round_fail(r, msg);
		}
	}
	return 0;
}

/* The kernel ended cleanly and nothing more came. */
static int finish(struct chan_run *r, aql_completion done, aql_channel_fn fn)
{
	uint32_t n = 0;
	aql_status st;
	char msg[320];

	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	if (st != AQL_OK)
		return fail("aql_completion_wait", st);
	if (r->fails) {
		snprintf(msg, sizeof(msg), "%u sends did not return AQL_CHANNEL_SENT", r->fails);
		return round_fail(r, msg);
	}
	st = aql_channel_drain(r->ch, 0, fn, &r->check, &n);
	if (st != AQL_OK)
		return fail("aql_channel_drain", st);
	if (n || r->check.err[0]) {
		snprintf(msg, sizeof(msg), "%u messages more than were sent%s%s", n,
			 r->check.err[0] ? ": " : "", r->check.err);
		return round_fail(r, msg);
	}
	return 0;
}

static int discard(const aql_channel_msg *m, void *arg)
{
	(void)m, (void)arg;
	return 0;
}

/*
 * After a failure: let the producers go and drain what they still send
 * until the kernel ends, so that the agent can be destroyed. If it does
 * not end, the agent is left to the process's exit.
 */
static void abandon(struct chan_run *r, aql_completion done)
{
	uint64_t t0 = now_ns();

	__atomic_store_n(&r->sync[1], 1, __ATOMIC_RELEASE);
	if (r->check.ack)
		__atomic_store_n(r->check.ack, UINT32_MAX, __ATOMIC_RELEASE);
	while (!aql_completion_done(done) && now_ns() - t0 < WAIT_TIMEOUT_NS)
		if (aql_channel_drain(r->ch, 0, discard, NULL, NULL) != AQL_OK)
			break;
	r->stuck = !aql_completion_done(done);
}

/* The part of the round all producers were sending at once. */
static double overlap(const struct chan_run *r)
{
	uint64_t lo = UINT64_MAX, hi = 0, first_end = UINT64_MAX, last_start = 0;

	for (uint32_t p = 0; p < r->producers; p++) {
		uint64_t s = r->spans[2 * p], e = r->spans[2 * p + 1];

		lo = s < lo ? s : lo;
		hi = e > hi ? e : hi;
		last_start = s > last_start ? s : last_start;
		first_end = e < first_end ? e : first_end;
	}
	if (hi <= lo || first_end <= last_start)
		return 0;
	return (double)(first_end - last_start) / (double)(hi - lo);
}

/* One throughput round: msgs messages, split among the producers. */
static int chan_round(struct chan_run *r, uint32_t msgs, uint64_t *ns, double *ovl)
{
	aql_launch_config cfg = { .grid = { PRODUCE_GRID }, .workgroup = { 1 } };
	uint32_t per = msgs / r->producers;
	aql_completion done = { 0 };
	uint64_t t0;
	aql_status st;

	r->check.slot_size = r->slot_size;
	check_reset(&r->check, r->producers, r->bytes);
	memset(r->spans, 0, sizeof(r->spans));
	memset(r->sync, 0, sizeof(r->sync));
	r->fails = 0;
	st = AQL_LAUNCH(r->q, r->produce, &cfg, &done, AQL_ARG(r->ch), AQL_ARG(r->producers),
			AQL_ARG(per), AQL_ARG(r->bytes), AQL_ARG((uint64_t)(uintptr_t)r->sync),
			AQL_ARG((uint64_t)(uintptr_t)r->spans),
			AQL_ARG((uint64_t)(uintptr_t)&r->fails));
	if (st != AQL_OK)
		return fail("aql_launch chan_produce", st);
	/* The clock starts when every producer is there, as the peer's does. */
	t0 = now_ns();
	while (__atomic_load_n(&r->sync[0], __ATOMIC_ACQUIRE) < r->producers) {
		if (aql_completion_done(done) || now_ns() - t0 > WAIT_TIMEOUT_NS) {
			abandon(r, done);
			return round_fail(r, "the producers did not all start");
		}
		sched_yield();
	}
	t0 = now_ns();
	__atomic_store_n(&r->sync[1], 1, __ATOMIC_RELEASE);
	if (consume(r, done, (uint64_t)per * r->producers, false, on_message)) {
		abandon(r, done);
		return -1;
	}
	*ns = now_ns() - t0;
	if (finish(r, done, on_message))
		return -1;
	if (check_done(&r->check, per))
		return round_fail(r, r->check.err);
	*ovl = overlap(r);
	return 0;
}

/* ---- throughput metrics ------------------------------------------------ */

static int note_add(struct chan_state *s, const char *metric, struct chan_run *r,
		    uint32_t rounds, uint64_t msgs, double ovl_med, double ovl_min)
{
	struct chan_note *n;
	aql_status st;

	if (s->nnotes == ARRAY_SIZE(s->notes))
		return 0;
	n = &s->notes[s->nnotes++];
	n->metric = metric;
	n->rounds = rounds;
	n->msgs = msgs;
	n->overlap_med = ovl_med;
	n->overlap_min = ovl_min;
	st = aql_channel_get_stats(r->ch, &n->stats);
	if (st != AQL_OK)
		return fail("aql_channel_get_stats", st);
	if (n->stats.sent != n->stats.received || n->stats.drops) {
		progress_clear();
		fprintf(stderr, "aql-bench: %s: channel counted %" PRIu64 " sent, %" PRIu64
			" received, %" PRIu64 " dropped\n", metric, n->stats.sent,
			n->stats.received, n->stats.drops);
		return -1;
	}
	return 0;
}

static uint32_t dpdk_producers(int peer)
{
	return peer == R_DPDK_MP8 || peer == R_DPDK_MP8_SPIN ? 8 : 1;
}

/*
 * One round of the DPDK peer, 1 producer (SP/SC or MP/SC) or 8 (MP/SC): *rate in msgs/s,
 * counted in *limited if it stopped at the time limit.
 */
static int dpdk_round(struct ctx *ctx, int peer, struct chan_check *c, double *rate,
		      uint32_t *limited)
{
#ifdef AQL_BENCH_DPDK
	struct chan_state *s = state_of(ctx);
	uint32_t np = dpdk_producers(peer), per = s->msgs / np;
	bool spin = peer == R_DPDK_SPSC_SPIN || peer == R_DPDK_MP8_SPIN;
	uint64_t ns = 0, got = 0;

	check_reset(c, np, 64);
	c->slot_size = 0;
	if (chan_dpdk_round(np, per, peer != R_DPDK_SPSC && peer != R_DPDK_SPSC_SPIN, spin,
			    ctx->opts->quick ? DPDK_LIMIT_QUICK_NS : DPDK_LIMIT_NS, c, &ns, &got) ||
	    (got == (uint64_t)per * np && check_done(c, per))) {
		progress_clear();
		fprintf(stderr, "aql-bench: DPDK peer, %u producer%s: %s\n", np,
			np == 1 ? "" : "s", c->err[0] ? c->err : "failed");
		return -1;
	}
	*limited += got < (uint64_t)per * np;
	*rate = rate_of(got, ns);
	return 0;
#else
	(void)ctx, (void)peer, (void)c, (void)rate, (void)limited;
	return -1;
#endif
}

/*
 * Rounds of the channel metric `which` (after a warm-up round), taking
 * turns with the DPDK peer `peer` (or -1), which one goes first
 * alternating. Fills the state's rates.
 */
static int measure(struct ctx *ctx, int which, const int *peers, int npeers,
		   const char *metric)
{
	static const uint32_t producers[] = { [R_1P] = 1, [R_2P] = 2, [R_8P] = 8, [R_1P_128] = 1 };
	struct chan_state *s = state_of(ctx);
	uint32_t rounds = ctx->sz.rounds, slot = which == R_1P_128 ? 128 : 64;
	uint32_t bytes = which == R_1P_128 ? 64 : 56, np = producers[which];
	uint32_t limited[MAX_PEERS] = { 0 };
	double *v = calloc((size_t)rounds * (MAX_PEERS + 2), sizeof(double));
	double *ov = v + rounds, *pv = v + 2 * (size_t)rounds;
	struct rate ovl;
	struct chan_run *r = calloc(1, sizeof(*r));
	struct chan_check *pc = calloc(1, sizeof(*pc));
	uint64_t ns;
	int rc = -1, n = npeers + 1;

	if (!v || !r || !pc) {
		fail_errno("calloc", ENOMEM);
		goto out;
	}
	if (s->dpdk_why[0])
		n = 1;
	if (run_open(r, np, slot, bytes))
		goto out;
	if (chan_round(r, s->msgs, &ns, &ov[0]))
		goto out_close;
	/* Each round runs the channel and every peer, the first rotating. */
	for (uint32_t i = 0; i < rounds; i++) {
		for (int k = 0; k < n; k++) {
			int j = (int)((i + (uint32_t)k) % (uint32_t)n) - 1;	/* -1: channel */

			if (j < 0) {
				if (chan_round(r, s->msgs, &ns, &ov[i]))
					goto out_close;
				v[i] = rate_of(s->msgs, ns);
				continue;
			}
			/* A warm-up round of the peer too. */
			if (i == 0 && dpdk_round(ctx, peers[j], pc, &pv[(size_t)j * rounds],
						 &limited[j]))
				goto out_close;
			if (i == 0)
				limited[j] = 0;
			if (dpdk_round(ctx, peers[j], pc, &pv[(size_t)j * rounds + i], &limited[j]))
				goto out_close;
		}
	}
	rate_stats(v, rounds, np, &s->rates[which]);
	s->rates[which].unit = "msgs/s";
	s->have_rate[which] = true;
	for (int j = 0; j < n - 1; j++) {
		int k = peers[j];

		rate_stats(&pv[(size_t)j * rounds], rounds, dpdk_producers(k), &s->rates[k]);
		s->rates[k].unit = "msgs/s";
		s->have_rate[k] = true;
		s->limited[k] = limited[j];
	}
	rate_stats(ov, rounds, np, &ovl);
	rc = note_add(s, metric, r, rounds + 1, s->msgs, ovl.median, ovl.min);
out_close:
	run_close(r);
	if (r->stuck)
		r = NULL;	/* the kernel may still write it */
out:
	free(v);
	free(r);
	free(pc);
	return rc;
}

static int report_rate(struct ctx *ctx, struct result *res, int which, int peer, int peer2,
		       int peer3)
{
	struct chan_state *s = state_of(ctx);
	int peers[MAX_PEERS] = { peer, peer2, peer3 };
	int n = peer < 0 ? 0 : peer2 < 0 ? 1 : peer3 < 0 ? 2 : 3;

	if (!s->have_rate[which] && measure(ctx, which, peers, n, res->metric))
		return -1;
	res->kind = RESULT_RATE;
	res->rate = s->rates[which];
	return 0;
}

static int bench_1p(struct ctx *ctx, struct result *res)
{
	return report_rate(ctx, res, R_1P, R_DPDK_SPSC, R_DPDK_SPSC_SPIN, R_DPDK_MPSC);
}

static int bench_2p(struct ctx *ctx, struct result *res)
{
	return report_rate(ctx, res, R_2P, -1, -1, -1);
}

static int bench_8p(struct ctx *ctx, struct result *res)
{
	return report_rate(ctx, res, R_8P, R_DPDK_MP8, R_DPDK_MP8_SPIN, -1);
}

static int bench_1p_128(struct ctx *ctx, struct result *res)
{
	return report_rate(ctx, res, R_1P_128, -1, -1, -1);
}

static struct goal chan_goals[];

static int report_peer(struct ctx *ctx, struct result *res, int which)
{
	struct chan_state *s = state_of(ctx);

	if (!s->have_rate[which]) {
		res->kind = RESULT_SKIPPED;
		res->skipped = s->dpdk_why[0] ? s->dpdk_why : "not measured";
		return 0;
	}
	res->kind = RESULT_RATE;
	res->rate = s->rates[which];
	return 0;
}

static int bench_dpdk_spsc(struct ctx *ctx, struct result *res)
{
	return report_peer(ctx, res, R_DPDK_SPSC);
}

static int bench_dpdk_mpsc(struct ctx *ctx, struct result *res)
{
	return report_peer(ctx, res, R_DPDK_MPSC);
}

static int bench_dpdk_mp8(struct ctx *ctx, struct result *res)
{
	return report_peer(ctx, res, R_DPDK_MP8);
}

static int bench_dpdk_spsc_spin(struct ctx *ctx, struct result *res)
{
	return report_peer(ctx, res, R_DPDK_SPSC_SPIN);
}

static int bench_dpdk_mp8_spin(struct ctx *ctx, struct result *res)
{
	return report_peer(ctx, res, R_DPDK_MP8_SPIN);
}

/* ---- latency ------------------------------------------------------------ */

static int on_ping(const aql_channel_msg *m, void *arg)
{
	struct chan_check *c = arg;
	uint64_t now = ticks(), sent;
	uint32_t seq;

	if (on_message(m, arg))
		return -1;
	memcpy(&sent, (const uint8_t *)m->data + 8, 8);
	seq = c->next[0] - 1;
	if (seq >= c->lat_skip && seq - c->lat_skip < c->lat_n)
		c->lat[seq - c->lat_skip] = now - sent;
	/* Release: the producer may send again. */
	__atomic_store_n(c->ack, seq + 1, __ATOMIC_RELEASE);
	return 0;
}

/*
 * n samples (after LAT_WARMUP) of send to receive, in ns; gap_ns between
 * an acknowledgement and the next send; rtt (if not NULL) gets the
 * producer's send-to-acknowledgement times.
 */
static int ping_run(struct ctx *ctx, const char *metric, uint32_t n, uint64_t gap_ns, bool poll,
		    uint64_t *lat, uint64_t *rtt)
{
	struct chan_state *s = state_of(ctx);
	aql_launch_config cfg = { .grid = { 1 }, .workgroup = { 1 } };
	uint32_t total = n + LAT_WARMUP, bytes = 56;
	aql_completion done = { 0 };
	struct chan_run *r = calloc(1, sizeof(*r));
	uint64_t *ticks_rtt = calloc(total, sizeof(uint64_t));
	aql_status st;
	int rc = -1;

	if (!r || !ticks_rtt) {
		fail_errno("calloc", ENOMEM);
		goto out;
	}
	if (run_open(r, 1, 64, bytes))
		goto out;
	check_reset(&r->check, 1, bytes);
	r->check.slot_size = 64;
	r->check.ack = &r->ack;
	r->check.lat = lat;
	r->check.lat_skip = LAT_WARMUP;
	r->check.lat_n = n;
	st = AQL_LAUNCH(r->q, r->ping, &cfg, &done, AQL_ARG(r->ch), AQL_ARG(total),
			AQL_ARG(bytes), AQL_ARG((uint64_t)(uintptr_t)&r->ack),
			AQL_ARG((uint64_t)(uintptr_t)ticks_rtt),
			AQL_ARG((uint64_t)(uintptr_t)&r->fails), AQL_ARG((uint64_t)(
				(double)gap_ns / s->ns_per_tick)));
	if (st != AQL_OK) {
		fail("aql_launch chan_ping", st);
		goto out_close;
	}
	if (consume(r, done, total, poll, on_ping)) {
		abandon(r, done);
		goto out_close;
	}
	if (finish(r, done, on_ping))
		goto out_close;
	if (note_add(s, metric, r, 1, total, 1, 1))
		goto out_close;
	for (uint32_t i = 0; i < n; i++) {
		lat[i] = (uint64_t)((double)lat[i] * s->ns_per_tick + 0.5);
		if (rtt)
			rtt[i] = (uint64_t)((double)ticks_rtt[LAT_WARMUP + i] * s->ns_per_tick + 0.5);
	}
	rc = 0;
out_close:
	run_close(r);
	if (r->stuck)
		return rc;	/* the kernel may still write them */
out:
	free(r);
	free(ticks_rtt);
	return rc;
}

static int latency_metric(struct ctx *ctx, struct result *res, uint32_t n, uint64_t gap_ns,
			  bool poll, bool want_rtt)
{
	struct chan_state *s = state_of(ctx);
	uint64_t *lat = alloc_samples(n), *rtt = want_rtt ? alloc_samples(n) : NULL;
	int rc = -1;

	if (!lat || (want_rtt && !rtt)) {
		fail_errno("malloc", ENOMEM);
		goto out;
	}
	if (ping_run(ctx, res->metric, n, gap_ns, poll, lat, rtt))
		goto out;
	latency_stats(lat, n, &res->lat);
	res->kind = RESULT_LATENCY;
	if (rtt) {
		latency_stats(rtt, n, &s->lat_rtt);
		s->have_rtt = true;
	}
	rc = 0;
out:
	free(lat);
	free(rtt);
	return rc;
}

static int bench_latency(struct ctx *ctx, struct result *res)
{
	return latency_metric(ctx, res, ctx->sz.block_samples, 0, false, true);
}

static int bench_latency_poll(struct ctx *ctx, struct result *res)
{
	return latency_metric(ctx, res, ctx->sz.block_samples, 0, true, false);
}

static int bench_latency_wake(struct ctx *ctx, struct result *res)
{
	/* Each sample sleeps WAKE_GAP_NS: a tenth of the count. */
	return latency_metric(ctx, res, ctx->sz.block_samples / 10, WAKE_GAP_NS, false, false);
}

static int bench_ack_rtt(struct ctx *ctx, struct result *res)
{
	struct chan_state *s = state_of(ctx);

	if (!s->have_rtt) {
		res->kind = RESULT_SKIPPED;
		res->skipped = "chan_latency_ns did not run";
		return 0;
	}
	res->kind = RESULT_LATENCY;
	res->lat = s->lat_rtt;
	return 0;
}

/* ---- mode --------------------------------------------------------------- */

/* ns per tick against CLOCK_MONOTONIC: the median of three 20 ms spans. */
static double calibrate(void)
{
	struct timespec d = { 0, 20000000 };
	double r[3], t;

	for (int i = 0; i < 3; i++) {
		uint64_t n0 = now_ns(), c0 = ticks(), n1, c1;

		nanosleep(&d, NULL);
		n1 = now_ns();
		c1 = ticks();
		r[i] = c1 > c0 ? (double)(n1 - n0) / (double)(c1 - c0) : 1.0;
	}
	if (r[0] > r[1]) {
		t = r[0];
		r[0] = r[1];
		r[1] = t;
	}
	if (r[1] > r[2])
		r[1] = r[2];
	return r[0] > r[1] ? r[0] : r[1];
}

/* Which of constant_tsc / nonstop_tsc /proc/cpuinfo lists. */
static void tsc_flags(char *out, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(out, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		snprintf(out, len, "%s%s", strstr(line, " constant_tsc") ? "constant_tsc " : "",
			 strstr(line, " nonstop_tsc") ? "nonstop_tsc" : "");
		if (!out[0])
			snprintf(out, len, "neither constant_tsc nor nonstop_tsc");
		break;
	}
	fclose(f);
}

static int chan_setup(struct ctx *ctx)
{
	struct chan_state *s = &the_chan_state;

	memset(s, 0, sizeof(*s));
	ctx->state = s;
	s->msgs = ctx->opts->quick ? MSGS_QUICK : MSGS_FULL;
	s->ns_per_tick = calibrate();
	tsc_flags(s->tsc_flags, sizeof(s->tsc_flags));
#ifdef AQL_BENCH_DPDK
	if (chan_dpdk_probe(s->dpdk_why, sizeof(s->dpdk_why)))
		return -1;
#else
	snprintf(s->dpdk_why, sizeof(s->dpdk_why),
		 "DPDK peer not built (no libdpdk when aql-bench was configured)");
#endif
	if (s->dpdk_why[0])
		chan_goals[0] = (struct goal){
			"goal_chan_mpsc_1p_anchor",
			"chan_mpsc_1p vs 5 M/s ANCHOR (not measured)",
			"chan_mpsc_1p", NULL, true, 5e6, "msgs/s" };
	return 0;
}

static int chan_banner(const struct ctx *ctx)
{
	const struct chan_state *s = state_of(ctx);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	printf("aql-bench --channel: %u messages per round, %u rounds after a warm-up round, "
	       "%s run, %ld CPUs\n", s->msgs, ctx->sz.rounds, ctx->opts->quick ? "quick" : "full",
	       cpus);
	printf("a message is one 64-byte slot: 8-byte header + 56 payload bytes "
	       "(_slot128: 128-byte slots, 64 payload bytes); ring of 4096 slots\n");
	printf("producers: work-items of a private CPU agent, one per work-group, "
	       "workers = producers; consumer: this thread (drain, wait when empty)\n");
	printf("latency clock: %s, %.4f GHz against CLOCK_MONOTONIC (%s)\n",
#if defined(__x86_64__)
	       "rdtscp",
#elif defined(__aarch64__)
	       "cntvct_el0",
#else
	       "CLOCK_MONOTONIC",
#endif
	       1.0 / s->ns_per_tick, s->tsc_flags);
#ifdef AQL_BENCH_DPDK
	if (!s->dpdk_why[0])
		printf("peer: %s rte_ring, esize 64, 4096 entries, rte_ring_init() without EAL\n",
		       chan_dpdk_version());
#endif
	if (s->dpdk_why[0])
		printf("peer: %s; goal 1 is judged against an ANCHOR, not a measurement\n",
		       s->dpdk_why);
	putchar('\n');
	return 0;
}

static void chan_cleanup(struct ctx *ctx)
{
	const struct chan_state *s = state_of(ctx);

	static const char *const peers[NRATES] = {
		[R_DPDK_SPSC] = "dpdk_ring_spsc", [R_DPDK_SPSC_SPIN] = "dpdk_ring_spsc_spin",
		[R_DPDK_MPSC] = "dpdk_ring_mpsc_1p",
		[R_DPDK_MP8] = "dpdk_ring_mp_8p", [R_DPDK_MP8_SPIN] = "dpdk_ring_mp_8p_spin" };

	if (!s || ctx->opts->json || !s->nnotes)
		return;
	for (int k = R_DPDK_SPSC; k <= R_DPDK_MP8_SPIN; k++)
		if (s->have_rate[k] && s->limited[k])
			printf("%s: %u of %u rounds stopped at the %.1f s limit (rate: what "
			       "arrived by then)\n", peers[k], s->limited[k], s->rates[k].rounds,
			       (double)(ctx->opts->quick ? DPDK_LIMIT_QUICK_NS : DPDK_LIMIT_NS) / 1e9);
	printf("\n%-30s %10s %10s %10s  %s\n", "channel, per round", "messages",
	       "full_waits", "wakeups", "producers all sending (median, worst round)");
	for (size_t i = 0; i < s->nnotes; i++) {
		const struct chan_note *n = &s->notes[i];

		printf("  %-28s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %3.0f%% %3.0f%%\n",
		       n->metric, n->msgs, n->stats.full_waits / n->rounds,
		       n->stats.wakeups / n->rounds, 100.0 * n->overlap_med,
		       100.0 * n->overlap_min);
	}
}

static const struct bench chan_benches[] = {
	{ "chan_mpsc_1p",		bench_1p },
	{ "dpdk_ring_spsc",		bench_dpdk_spsc },
	{ "dpdk_ring_spsc_spin",	bench_dpdk_spsc_spin },
	{ "dpdk_ring_mpsc_1p",		bench_dpdk_mpsc },
	{ "chan_mpsc_2p",		bench_2p },
	{ "chan_mpsc_8p",		bench_8p },
	{ "dpdk_ring_mp_8p",		bench_dpdk_mp8 },
	{ "dpdk_ring_mp_8p_spin",	bench_dpdk_mp8_spin },
	{ "chan_mpsc_1p_slot128",	bench_1p_128 },
	{ "chan_latency_ns",		bench_latency },
	{ "chan_ack_rtt_ns",		bench_ack_rtt },
	{ "chan_latency_poll_ns",	bench_latency_poll },
	{ "chan_latency_wake_ns",	bench_latency_wake },
};

/* Goal 1 becomes the anchor goal when the peer is not there (setup). */
static struct goal chan_goals[] = {
	{ "ratio_chan_mpsc_1p_over_dpdk_mpsc",
	  "chan_mpsc_1p / DPDK rte_ring MP/SC (same run)",
	  "chan_mpsc_1p", "dpdk_ring_mpsc_1p", true, 1.2, NULL },
	{ "ratio_chan_mpsc_8p_over_1p",
	  "chan_mpsc_8p / chan_mpsc_1p (8 producers, 2 cores)",
	  "chan_mpsc_8p", "chan_mpsc_1p", true, 0.5, NULL },
};

const struct mode bench_mode_channel = {
	.name = "channel",
	.benches = chan_benches,
	.nbenches = ARRAY_SIZE(chan_benches),
	.goals = chan_goals,
	.ngoals = ARRAY_SIZE(chan_goals),
	.setup = chan_setup,
	.cleanup = chan_cleanup,
	.banner = chan_banner,
};
