/* SPDX-License-Identifier: MIT */
/*
 * Queues through the HSA API on the CPU agent: ROCr's argument rules,
 * every index function in every memory order, packets written into the
 * ring and announced on the doorbell by the program itself (wrapping the
 * ring many times), barrier-AND/OR and AMD's BARRIER_VALUE packets,
 * dispatch times, a full ring's read-index load, the error callback of
 * a queue that meets a bad packet, and hsa_amd_queue_set_priority.
 * argv[1]: the library.
 */
#include <pthread.h>
#include <string.h>

#include "hsa_test.h"

/* Reserve a slot, fill it with *packet but its first 4 bytes, publish and ring. */
static uint64_t submit(hsa_queue_t *q, const void *packet, uint16_t header)
{
	uint64_t id = hsa_queue_add_write_index_screlease(q, 1);
	char *slot;

	while (id - hsa_queue_load_read_index_scacquire(q) >= q->size)
		;
	slot = (char *)q->base_address + (id % q->size) * 64;
	memcpy(slot + 4, (const char *)packet + 4, 60);
	ht_publish(slot, header, ((const uint16_t *)packet)[1]);
	hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)id);
	return id;
}

static int done(hsa_signal_t s)
{
	return hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(),
					 HSA_WAIT_STATE_BLOCKED) == 0;
}

/* Not completed within 20 ms (a dependency holds it back). */
static int held(hsa_signal_t s)
{
	return hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, 20000000,
					 HSA_WAIT_STATE_BLOCKED) != 0;
}

static void bad_creates(hsa_agent_t cpu)
{
	uint32_t max = 0;
	hsa_queue_t *q;

	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &max));
	CHECK_ST(hsa_queue_create((hsa_agent_t){ 8 }, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL,
				  UINT32_MAX, UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_queue_create(cpu, 3, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_create(cpu, 0, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_create(cpu, max * 2, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_create(cpu, 4, 7, NULL, NULL, UINT32_MAX, UINT32_MAX, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_create(cpu, 4, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_destroy(NULL), HSA_STATUS_ERROR_INVALID_QUEUE);
}

typedef uint64_t (*add_fn)(const hsa_queue_t *, uint64_t);
typedef uint64_t (*cas_fn)(const hsa_queue_t *, uint64_t, uint64_t);
typedef uint64_t (*load_fn)(const hsa_queue_t *);
typedef void (*store_fn)(const hsa_queue_t *, uint64_t);

#define ORDERS(op)                                                             \
	{ hsa_queue_##op##_relaxed, hsa_queue_##op##_scacquire,                \
	  hsa_queue_##op##_screlease, hsa_queue_##op##_scacq_screl,            \
	  hsa_queue_##op##_acquire, hsa_queue_##op##_release,                  \
	  hsa_queue_##op##_acq_rel }

/* On a queue of its own, left as it was found (no packet is announced). */
static void indices(hsa_agent_t cpu)
{
	static const add_fn add[] = ORDERS(add_write_index);
	static const cas_fn cas[] = ORDERS(cas_write_index);
	static const load_fn load_w[] = { hsa_queue_load_write_index_relaxed,
					  hsa_queue_load_write_index_scacquire,
					  hsa_queue_load_write_index_acquire };
	static const load_fn load_r[] = { hsa_queue_load_read_index_relaxed,
					  hsa_queue_load_read_index_scacquire,
					  hsa_queue_load_read_index_acquire };
	static const store_fn store_w[] = { hsa_queue_store_write_index_relaxed,
					    hsa_queue_store_write_index_screlease,
					    hsa_queue_store_write_index_release };
	hsa_queue_t *q;
	uint64_t w = 0;

	CHECK_OK(hsa_queue_create(cpu, 8, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q));
	if (!q)
		return;
	/* 8 is below QUEUE_MIN_SIZE: the queue has the minimum, as on ROCr. */
	CHECK(q->size == 64 && q->type == HSA_QUEUE_TYPE_MULTI, "size %u type %u", q->size, q->type);
	CHECK(q->base_address && (uintptr_t)q->base_address % 64 == 0, "ring %p", q->base_address);
	CHECK(q->doorbell_signal.handle != 0, "doorbell");
	CHECK(q->features & HSA_QUEUE_FEATURE_KERNEL_DISPATCH, "features 0x%x", q->features);
	for (unsigned i = 0; i < 3; i++) {
		CHECK(load_w[i](q) == 0, "write index starts at 0");
		CHECK(load_r[i](q) == 0, "read index starts at 0");
	}
	for (unsigned i = 0; i < 7; i++) {
		CHECK(add[i](q, 3) == w, "add %u returns the old index", i);
		w += 3;
		CHECK(cas[i](q, w + 1, 0) == w, "failed cas %u returns the index", i);
		CHECK(cas[i](q, w, w + 2) == w, "cas %u returns the old index", i);
		w += 2;
		CHECK(hsa_queue_load_write_index_relaxed(q) == w, "after cas %u", i);
	}
	for (unsigned i = 0; i < 3; i++) {
		store_w[i](q, 100 + i);
		CHECK(load_w[i](q) == 100 + i, "store write index %u", i);
	}
	/* The read index is the packet processor's to store (aql's, as the CP's
	 * on ROCr), so the store_read_index functions are not called here. */
	store_w[0](q, 0);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_ST(hsa_queue_destroy(q), HSA_STATUS_ERROR_INVALID_QUEUE);
}

/* Barrier packets through a 4-slot ring, many times round. */
static void barriers(hsa_agent_t cpu)
{
	hsa_barrier_and_packet_t and_ = { 0 };
	hsa_barrier_or_packet_t or_ = { 0 };
	hsa_amd_barrier_value_packet_t value = { 0 };
	hsa_signal_t c, d1, d2;
	hsa_queue_t *q;
	hsa_amd_profiling_dispatch_time_t t = { 0, 0 };
	int ok = 1;

	CHECK_OK(hsa_queue_create(cpu, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &q));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &c));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &d1));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &d2));
	if (!q)
		return;
	CHECK_OK(hsa_amd_profiling_set_profiler_enabled(q, 1));

	/* Wrap-around: 4-slot ring, 25 packets, each awaited. */
	and_.completion_signal = c;
	for (int i = 0; i < 25 && ok; i++) {
		hsa_signal_store_relaxed(c, 1);
		submit(q, &and_, ht_header(HSA_PACKET_TYPE_BARRIER_AND));
		ok = done(c);
	}
	CHECK(ok, "25 barriers through a 4-slot ring");
	/* The processor moves the read index on after the completion signal. */
	for (uint64_t t0 = ht_now_ns(); hsa_queue_load_read_index_scacquire(q) != 25 &&
					ht_now_ns() - t0 < ht_timeout_ns();)
		;
	CHECK(hsa_queue_load_read_index_scacquire(q) == 25, "read index %llu",
	      (unsigned long long)hsa_queue_load_read_index_scacquire(q));
	CHECK_OK(hsa_amd_profiling_get_dispatch_time(cpu, c, &t));
	CHECK(t.start && t.start <= t.end, "dispatch time %llu..%llu",
	      (unsigned long long)t.start, (unsigned long long)t.end);

	/* Profiling off: a new signal keeps its zero stamps. */
	CHECK_OK(hsa_amd_profiling_set_profiler_enabled(q, 0));
	and_.completion_signal = d1;
	submit(q, &and_, ht_header(HSA_PACKET_TYPE_BARRIER_AND));
	CHECK(done(d1), "unprofiled barrier");
	CHECK_OK(hsa_amd_profiling_get_dispatch_time(cpu, d1, &t));
	CHECK(t.start == 0 && t.end == 0, "no stamps: %llu..%llu",
	      (unsigned long long)t.start, (unsigned long long)t.end);
	hsa_signal_store_relaxed(d1, 1);
	and_.completion_signal = c;

	/* AND waits for every dependency. */
	and_.dep_signal[0] = d1;
	and_.dep_signal[3] = d2;
	hsa_signal_store_relaxed(c, 1);
	submit(q, &and_, ht_header(HSA_PACKET_TYPE_BARRIER_AND));
	CHECK(held(c), "AND: nothing met yet");
	hsa_signal_store_screlease(d1, 0);
	CHECK(held(c), "AND: one of two met");
	/* A signal a packet in flight uses is not destroyed, and stays live. */
	CHECK_ST(hsa_signal_destroy(d2), HSA_STATUS_ERROR);
	hsa_signal_store_screlease(d2, 0);
	CHECK(done(c), "AND: both met");

	/* OR waits for any. */
	hsa_signal_store_relaxed(d1, 1);
	hsa_signal_store_relaxed(d2, 1);
	or_.dep_signal[1] = d1;
	or_.dep_signal[4] = d2;
	or_.completion_signal = c;
	hsa_signal_store_relaxed(c, 1);
	submit(q, &or_, ht_header(HSA_PACKET_TYPE_BARRIER_OR));
	CHECK(held(c), "OR: nothing met yet");
	hsa_signal_store_screlease(d2, 0);
	CHECK(done(c), "OR: one met");

	/* BARRIER_VALUE: (value & mask) >= 8. */
	hsa_signal_store_relaxed(d1, 0x13);
	value.header.AmdFormat = HSA_AMD_PACKET_TYPE_BARRIER_VALUE;
	value.signal = d1;
	value.value = 8;
	value.mask = 0xc;
	value.cond = HSA_SIGNAL_CONDITION_GTE;
	value.completion_signal = c;
	hsa_signal_store_relaxed(c, 1);
	submit(q, &value, ht_header(HSA_PACKET_TYPE_VENDOR_SPECIFIC));
	CHECK(held(c), "BARRIER_VALUE: 0x13 & 0xc < 8");
	hsa_signal_store_screlease(d1, 0x1c);
	CHECK(done(c), "BARRIER_VALUE: 0x1c & 0xc >= 8");

	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(c));
	CHECK_OK(hsa_signal_destroy(d1));
	CHECK_OK(hsa_signal_destroy(d2));
}

/*
 * A full ring's read-index load waits for the processor (at most 1 ms,
 * hsa/queue.c) rather than answering at once: held by a barrier, the
 * index stays 0 through the wait; released, the loads see it move on.
 */
static void full_ring_load(hsa_agent_t cpu)
{
	hsa_barrier_and_packet_t hold = { 0 }, empty = { 0 };
	hsa_signal_t gate;
	hsa_queue_t *q;
	uint64_t t0, read, ns;

	CHECK_OK(hsa_queue_create(cpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &q));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &gate));
	if (!q)
		return;
	hold.dep_signal[0] = gate;
	submit(q, &hold, ht_header(HSA_PACKET_TYPE_BARRIER_AND));
	for (uint32_t i = 1; i < q->size; i++)
		submit(q, &empty, ht_header(HSA_PACKET_TYPE_BARRIER_AND));
	t0 = ht_now_ns();
	read = hsa_queue_load_read_index_relaxed(q);
	ns = ht_now_ns() - t0;
	CHECK(read == 0 && ns >= 1000000, "a held full ring: read index %llu after %llu ns "
	      "(want 0 after the load's 1 ms wait)", (unsigned long long)read,
	      (unsigned long long)ns);
	hsa_signal_store_screlease(gate, 0);
	for (t0 = ht_now_ns(); hsa_queue_load_read_index_scacquire(q) != q->size &&
			       ht_now_ns() - t0 < ht_timeout_ns();)
		;
	CHECK(hsa_queue_load_read_index_acquire(q) == q->size, "released: read index %llu",
	      (unsigned long long)hsa_queue_load_read_index_acquire(q));
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(gate));
}

struct callback_seen {
	pthread_mutex_t lock;
	int calls;
	hsa_status_t status;
	hsa_queue_t *source;
};

static void on_error(hsa_status_t status, hsa_queue_t *source, void *data)
{
	struct callback_seen *seen = data;

	pthread_mutex_lock(&seen->lock);
	seen->calls++;
	seen->status = status;
	seen->source = source;
	pthread_mutex_unlock(&seen->lock);
}

/* A packet of an unknown type stops the queue and reaches the callback. */
static void error_callback(hsa_agent_t cpu)
{
	struct callback_seen seen = { PTHREAD_MUTEX_INITIALIZER, 0, HSA_STATUS_SUCCESS, NULL };
	hsa_barrier_and_packet_t bad = { 0 };
	hsa_signal_t c;
	hsa_queue_t *q;
	int calls = 0;

	CHECK_OK(hsa_queue_create(cpu, 16, HSA_QUEUE_TYPE_MULTI, on_error, &seen, UINT32_MAX,
				  UINT32_MAX, &q));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &c));
	if (!q)
		return;
	bad.completion_signal = c;
	submit(q, &bad, 0x0107);	/* type 7: none that HSA defines */
	for (int i = 0; i < 1000 && !calls; i++) {
		hsa_signal_wait_relaxed(c, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns() / 1000,
					HSA_WAIT_STATE_BLOCKED);
		pthread_mutex_lock(&seen.lock);
		calls = seen.calls;
		pthread_mutex_unlock(&seen.lock);
	}
	pthread_mutex_lock(&seen.lock);
	CHECK(seen.calls == 1, "callback called %d times", seen.calls);
	CHECK(seen.status == HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "status 0x%x", seen.status);
	CHECK(seen.source == q, "source %p, queue %p", (void *)seen.source, (void *)q);
	pthread_mutex_unlock(&seen.lock);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(c));
}

/* A barrier-AND with no dependencies runs to completion on q. */
static void runs(hsa_queue_t *q)
{
	hsa_barrier_and_packet_t p = { 0 };

	CHECK_OK(hsa_signal_create(1, 0, NULL, &p.completion_signal));
	submit(q, &p, ht_header(HSA_PACKET_TYPE_BARRIER_AND));
	CHECK(done(p.completion_signal), "barrier after a priority change");
	CHECK_OK(hsa_signal_destroy(p.completion_signal));
}

/*
 * ROCr's rules: a NULL queue or an unknown priority INVALID_ARGUMENT, a
 * queue that is not live INVALID_QUEUE. On the CPU agent LOW always
 * succeeds; raising (LOW to NORMAL, HIGH) succeeds where the process may
 * lower a thread's nice value, else ERROR naming CAP_SYS_NICE (libaql's
 * test_queue checks which). A soft queue has no processor of aql's.
 */
static void priority(hsa_agent_t cpu)
{
	hsa_queue_t fake = { 0 };
	hsa_queue_t *q, *soft;
	hsa_signal_t doorbell;
	hsa_status_t st;

	CHECK_OK(hsa_queue_create(cpu, 16, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q));
	if (!q)
		return;
	CHECK_ST(hsa_amd_queue_set_priority(NULL, HSA_AMD_QUEUE_PRIORITY_LOW),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_queue_set_priority(&fake, HSA_AMD_QUEUE_PRIORITY_LOW),
		 HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_ST(hsa_amd_queue_set_priority(q, (hsa_amd_queue_priority_t)3),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_amd_queue_set_priority(q, HSA_AMD_QUEUE_PRIORITY_NORMAL));
	CHECK_OK(hsa_amd_queue_set_priority(q, HSA_AMD_QUEUE_PRIORITY_LOW));
	runs(q);
	st = hsa_amd_queue_set_priority(q, HSA_AMD_QUEUE_PRIORITY_HIGH);
	CHECK(st == HSA_STATUS_SUCCESS ||
	      (st == HSA_STATUS_ERROR && strstr(ht_status_text(st), "CAP_SYS_NICE")),
	      "HIGH: 0x%x %s", st, ht_status_text(st));
	runs(q);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_ST(hsa_amd_queue_set_priority(q, HSA_AMD_QUEUE_PRIORITY_LOW),
		 HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_OK(hsa_signal_create(-1, 0, NULL, &doorbell));
	CHECK_OK(hsa_soft_queue_create(ht_region(cpu, HSA_REGION_GLOBAL_FLAG_FINE_GRAINED), 4,
				       HSA_QUEUE_TYPE_SINGLE, HSA_QUEUE_FEATURE_AGENT_DISPATCH,
				       doorbell, &soft));
	CHECK_ST(hsa_amd_queue_set_priority(soft, HSA_AMD_QUEUE_PRIORITY_LOW), HSA_STATUS_ERROR);
	CHECK_OK(hsa_queue_destroy(soft));
	CHECK_OK(hsa_signal_destroy(doorbell));
}

int main(int argc, char **argv)
{
	hsa_agent_t cpu;
	hsa_queue_t *q;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_queue_create((hsa_agent_t){ 1 }, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0,
				  &q), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	cpu = ht_cpu_agent();
	bad_creates(cpu);
	indices(cpu);
	barriers(cpu);
	full_ring_load(cpu);
	error_callback(cpu);
	priority(cpu);
	CHECK_OK(hsa_queue_create(cpu, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &q));
	CHECK_OK(hsa_queue_inactivate(q));
	/* The doorbell is the queue's, not the program's to destroy. */
	CHECK_ST(hsa_signal_destroy(q->doorbell_signal), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_amd_profiling_set_profiler_enabled(NULL, 1), HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_shut_down());
	CHECK_ST(hsa_amd_queue_set_priority(q, HSA_AMD_QUEUE_PRIORITY_LOW),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	return ht_finish();
}
