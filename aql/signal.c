/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdlib.h>

#include <aql/signal.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/spin.h"
#include "aql/queue_impl.h"
#include "util/wait.h"
#include "mem/host_mem.h"

/*
 * Signals come from a pool and are never returned to the system. A waiter
 * may free a signal the moment it sees the value it waited for, while the
 * thread that stored that value still reads the waiter count and may wake
 * the futex. With type-stable memory that late access touches a signal (at
 * worst a reused one, which then gets one spurious wake-up), never freed
 * memory. Freed signals are linked through queue_ptr.
 */
#define SIGNALS_PER_BLOCK 64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static aql_signal *pool_free;
/* Every block, for events registered after it was made. */
static aql_signal **blocks;
static uint32_t nblocks, blocks_cap;
static const struct aql_signal_events *events;

aql_status aql_signal_events_register(const struct aql_signal_events *ev)
{
	aql_status st = AQL_OK;

	pthread_mutex_lock(&pool_lock);
	if (events && events != ev) {
		st = aql_fail(AQL_ERR_BUSY, "signal events: another driver registered first");
	} else if (!events) {
		for (uint32_t i = 0; i < nblocks; i++)
			ev->block(blocks[i], SIGNALS_PER_BLOCK);
		__atomic_store_n(&events, ev, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&pool_lock);
	return st;
}

static aql_status pool_grow(void)
{
	aql_signal *block, **grown;
	aql_status st;

	if (nblocks == blocks_cap) {
		grown = realloc(blocks, (blocks_cap ? 2 * blocks_cap : 16) * sizeof(*blocks));
		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "no memory for the signal pool's list");
		blocks = grown;
		blocks_cap = blocks_cap ? 2 * blocks_cap : 16;
	}
	st = aql_host_mem_alloc(SIGNALS_PER_BLOCK * sizeof(*block), _Alignof(aql_signal),
				(void **)&block);
	if (st != AQL_OK)
		return st;
	blocks[nblocks++] = block;
	if (events)
		events->block(block, SIGNALS_PER_BLOCK);
	for (int i = 0; i < SIGNALS_PER_BLOCK; i++) {
		block[i].queue_ptr = (uint64_t)(uintptr_t)pool_free;
		pool_free = &block[i];
	}
	return AQL_OK;
}

aql_status aql_signal_create(int64_t initial, aql_signal **out)
{
	aql_signal *s;
	aql_status st = AQL_OK;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_signal_create: out is NULL");
	pthread_mutex_lock(&pool_lock);
	if (!pool_free)
		st = pool_grow();
	s = pool_free;
	if (st == AQL_OK)
		pool_free = (aql_signal *)(uintptr_t)__atomic_load_n(&s->queue_ptr, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&pool_lock);
	if (st != AQL_OK)
		return st;
	/* The wait words stay as they are: a late waker may still read them.
	 * So do the event fields: they are the block's (aql_signal_events). */
	s->kind = AQL_SIGNAL_KIND_USER;
	/* Relaxed atomics: a late waker may still read queue_ptr. */
	__atomic_store_n(&s->start_ts, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->end_ts, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->queue_ptr, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->value, initial, __ATOMIC_RELEASE);
	*out = s;
	return AQL_OK;
}

/* How packet p uses the signal with this handle, or NULL. */
static const char *use_of(const aql_packet *p, uint64_t handle)
{
	uint16_t type = aql_header_type(p->header);

	if (p->dispatch.completion_signal == handle)
		return "completion signal";
	if (type == AQL_PACKET_BARRIER_AND || type == AQL_PACKET_BARRIER_OR) {
		for (int i = 0; i < 5; i++)
			if (p->barrier.dep_signal[i] == handle)
				return "dependency signal";
	}
	if (type == AQL_PACKET_VENDOR_SPECIFIC &&
	    p->barrier_value.header.format == AQL_AMD_PACKET_BARRIER_VALUE &&
	    p->barrier_value.signal == handle)
		return "BARRIER_VALUE signal";
	return NULL;
}

static int uses_signal(const aql_packet *p, void *user)
{
	return use_of(p, *(const uint64_t *)user) != NULL;
}

aql_status aql_signal_destroy(aql_signal *signal)
{
	uint64_t handle, queue_id, packet_id;
	aql_packet p;

	if (!signal)
		return AQL_OK;
	handle = aql_signal_handle(signal);
	if (aql_queue_find_pending(uses_signal, &handle, &p, &queue_id, &packet_id))
		return aql_fail(AQL_ERR_BUSY,
				"signal %p is the %s of packet %llu of queue %llu, which is in flight",
				(void *)signal, use_of(&p, handle), (unsigned long long)packet_id,
				(unsigned long long)queue_id);
	pthread_mutex_lock(&pool_lock);
	signal->kind = AQL_SIGNAL_KIND_INVALID;
	__atomic_store_n(&signal->queue_ptr, (uint64_t)(uintptr_t)pool_free, __ATOMIC_RELAXED);
	pool_free = signal;
	pthread_mutex_unlock(&pool_lock);
	return AQL_OK;
}

/*
 * What each sleeping waiter waits for, so that a store wakes only waiters
 * it may satisfy. A program that waits for the last of many launches
 * sleeps on the queue's timeline signal, which every launch before it
 * decrements: without this each of them would wake it (a futex wake on
 * the packet processor's path, and a waiter that runs only to sleep
 * again). Each sleeping condition is listed, under its signal's bucket
 * lock, before the waiter counts itself in signal->waiters and until after
 * it counted itself out; a store reads waiters after its value (seq_cst),
 * and then the list and the value under the lock. So a store that sees
 * waiters sees the conditions of all but those that re-check the value
 * after its store, and it wakes when one is met by the value then, or
 * when it finds none listed. Stores after it check for themselves.
 */
#define SLEEP_BUCKETS 64

struct sleeper {
	struct sleeper *next;
	const struct aql_wait_cond *cond;
};

static struct sleep_bucket {
	pthread_mutex_t lock;
	struct sleeper *head;
} __attribute__((aligned(64))) sleepers[SLEEP_BUCKETS] = {
	[0 ... SLEEP_BUCKETS - 1] = { PTHREAD_MUTEX_INITIALIZER, NULL },
};

static struct sleep_bucket *bucket_of(const aql_signal *signal)
{
	return &sleepers[((uintptr_t)signal / sizeof(*signal)) % SLEEP_BUCKETS];
}

static void list_sleepers(uint32_t n, const struct aql_wait_cond *conds, struct sleeper *s)
{
	for (uint32_t i = 0; i < n; i++) {
		struct sleep_bucket *b = bucket_of(conds[i].signal);

		s[i].cond = &conds[i];
		pthread_mutex_lock(&b->lock);
		s[i].next = b->head;
		b->head = &s[i];
		pthread_mutex_unlock(&b->lock);
	}
}

static void unlist_sleepers(uint32_t n, const struct aql_wait_cond *conds, struct sleeper *s)
{
	for (uint32_t i = 0; i < n; i++) {
		struct sleep_bucket *b = bucket_of(conds[i].signal);
		struct sleeper **pp;

		pthread_mutex_lock(&b->lock);
		for (pp = &b->head; *pp != &s[i]; pp = &(*pp)->next)
			;
		*pp = s[i].next;
		pthread_mutex_unlock(&b->lock);
	}
}

/* Whether a store to signal may end a sleeper's wait. */
static int sleeper_met(const aql_signal *signal)
{
	struct sleep_bucket *b = bucket_of(signal);
	int listed = 0, met = 0;
	int64_t v;

	pthread_mutex_lock(&b->lock);
	v = __atomic_load_n(&signal->value, __ATOMIC_SEQ_CST);
	for (const struct sleeper *s = b->head; s && !met; s = s->next) {
		const struct aql_wait_cond *c = s->cond;

		if (c->signal != signal)
			continue;
		listed = 1;
		met = aql_signal_condition_met(c->cond, v & c->mask, c->compare);
	}
	pthread_mutex_unlock(&b->lock);
	return met || !listed;
}

/*
 * Both wakes: with events registered a waiter sleeps on the events or,
 * where they cannot have it sleep, on the futex words. The waiter's side
 * of the order is in aql_wait_conds.
 */
void aql_signal_wake_waiters(aql_signal *signal)
{
	const struct aql_signal_events *ev = __atomic_load_n(&events, __ATOMIC_ACQUIRE);
	uint32_t mark = __atomic_fetch_add(&signal->sleeping, 0, __ATOMIC_SEQ_CST), two = 2;

	/* The list only where there is something to wake: once a wake-up
	 * took the mark, the stores after it look no further. */
	if ((!mark && !ev) || !sleeper_met(signal))
		return;
	if (mark) {
		__atomic_compare_exchange_n(&signal->sleeping, &mark, 2, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_RELAXED);
		aql_futex_bump_and_wake(&signal->wake_seq);
		__atomic_compare_exchange_n(&signal->sleeping, &two, 0, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_RELAXED);
	}
	if (ev)
		ev->wake(signal);
}

/*
 * Registered wait helpers. A place is filled once (release) and never
 * emptied, so a waiter that loads a helper (acquire) may call it at any
 * time after; registration takes the pool's lock only to pick a place.
 */
static const struct aql_wait_helper *helpers[AQL_WAIT_HELPERS_MAX];
/* Set while this thread runs a helper: waits inside it call none. */
static __thread int in_help;
/* The deadline of the wait whose helpers run on this thread; 0 between. */
static __thread uint64_t help_deadline;

uint64_t aql_wait_helper_deadline(void)
{
	return help_deadline;
}

int aql_wait_help_off(int off)
{
	int was = in_help;

	in_help = off;
	return was;
}

aql_status aql_wait_helper_register(const struct aql_wait_helper *helper)
{
	aql_status st = AQL_OK;
	uint32_t i;

	if (!helper || !helper->help)
		return aql_fail(AQL_ERR_INVALID_ARG, "wait helper: NULL helper or help function");
	pthread_mutex_lock(&pool_lock);
	for (i = 0; i < AQL_WAIT_HELPERS_MAX && helpers[i] && helpers[i] != helper; i++)
		;
	if (i == AQL_WAIT_HELPERS_MAX)
		st = aql_fail(AQL_ERR_BUSY, "wait helper: all %d places are taken",
			      AQL_WAIT_HELPERS_MAX);
	else if (!helpers[i])
		__atomic_store_n(&helpers[i], helper, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&pool_lock);
	return st;
}

/* Run every helper once for these conditions; nonzero if one did work. */
static int help_wait(uint32_t n, const struct aql_wait_cond *conds, uint64_t deadline_ns)
{
	aql_signal *signals[64];
	const struct aql_wait_helper *h;
	int did = 0;

	if (in_help || !__atomic_load_n(&helpers[0], __ATOMIC_ACQUIRE))
		return 0;
	for (uint32_t i = 0; i < n; i++)
		signals[i] = conds[i].signal;
	in_help = 1;
	help_deadline = deadline_ns;
	/* Places fill in order, so the first empty one ends the list. */
	for (uint32_t i = 0; i < AQL_WAIT_HELPERS_MAX &&
			     (h = __atomic_load_n(&helpers[i], __ATOMIC_ACQUIRE)); i++)
		did |= h->help(h, n, signals) != 0;
	help_deadline = 0;
	in_help = 0;
	return did;
}

static int cond_met(const struct aql_wait_cond *c, int64_t *value)
{
	*value = __atomic_load_n(&c->signal->value, __ATOMIC_ACQUIRE);
	return aql_signal_condition_met(c->cond, *value & c->mask, c->compare);
}

static int any_met(uint32_t n, const struct aql_wait_cond *conds,
		   uint32_t *index, int64_t *observed)
{
	int64_t v;

	for (uint32_t i = 0; i < n; i++) {
		if (cond_met(&conds[i], &v)) {
			if (index)
				*index = i;
			if (observed)
				*observed = v;
			return 1;
		}
	}
	return 0;
}

static void set_waiting(uint32_t n, const struct aql_wait_cond *conds, int delta)
{
	for (uint32_t i = 0; i < n; i++)
		__atomic_fetch_add(&conds[i].signal->waiters, (uint32_t)delta,
				   __ATOMIC_SEQ_CST);
}

/* Each thread's spin-then-sleep waits (spin_ns neither 0 nor unbounded). */
static __thread struct aql_spin wait_spin;

static aql_status wait_sleeping(uint32_t n, const struct aql_wait_cond *conds,
				uint64_t deadline_ns, uint32_t *index, int64_t *observed)
{
	uint32_t *words[64], seqs[64];
	uint64_t tickets[64];
	struct sleeper listed[64];

	for (;;) {
		const struct aql_signal_events *ev = __atomic_load_n(&events, __ATOMIC_ACQUIRE);
		uint64_t until = deadline_ns;

		/* Work this thread can do itself beats a sleep and a wake-up;
		 * the check first, as the polls before may have met it. */
		if (any_met(n, conds, index, observed))
			return AQL_OK;
		if (help_wait(n, conds, deadline_ns)) {
			if (aql_now_ns() >= deadline_ns)
				return any_met(n, conds, index, observed) ? AQL_OK : AQL_ERR_TIMEOUT;
			continue;
		}
		/*
		 * Waiter half of the wake protocol in signal.h: announce, read
		 * the sequence words (and arm the events), then re-check the
		 * values. A host store reads waiters after its value (both
		 * seq_cst) and wakes the futex and the event; a device store
		 * raises the event after its value, and ev->arm/sleep keep
		 * every set after arm from being lost (aql/kfd/events.c).
		 */
		list_sleepers(n, conds, listed);
		set_waiting(n, conds, 1);
		for (uint32_t i = 0; i < n; i++) {
			words[i] = &conds[i].signal->wake_seq;
			seqs[i] = __atomic_load_n(words[i], __ATOMIC_ACQUIRE);
		}
		/* After the sequence: a wake that took the flag before it was
		 * set here bumps past seqs[], so the sleep below returns. */
		for (uint32_t i = 0; i < n; i++)
			__atomic_exchange_n(&conds[i].signal->sleeping, 1, __ATOMIC_SEQ_CST);
		if (ev)
			ev->arm(n, conds, tickets);
		if (any_met(n, conds, index, observed)) {
			if (ev)
				ev->disarm(n, conds, tickets);
			set_waiting(n, conds, -1);
			unlist_sleepers(n, conds, listed);
			return AQL_OK;
		}
		if (aql_now_ns() >= deadline_ns) {
			if (ev)
				ev->disarm(n, conds, tickets);
			set_waiting(n, conds, -1);
			unlist_sleepers(n, conds, listed);
			return AQL_ERR_TIMEOUT;
		}
		if (ev)
			until = ev->sleep(n, conds, tickets, deadline_ns);
		if (until)
			aql_futex_wait_many(n, words, seqs, until < deadline_ns ? until : deadline_ns);
		set_waiting(n, conds, -1);
		unlist_sleepers(n, conds, listed);
	}
}

aql_status aql_wait_conds(uint32_t n, const struct aql_wait_cond *conds,
			  uint64_t deadline_ns, uint64_t spin_ns,
			  uint32_t *index, int64_t *observed)
{
	uint64_t start, now, left, spin_end, budget = spin_ns;
	int adapt = spin_ns && spin_ns != UINT64_MAX;
	aql_status st;

	if (any_met(n, conds, index, observed))
		return AQL_OK;
	start = now = aql_now_ns();
	left = deadline_ns > now ? deadline_ns - now : 0;
	if (adapt)
		budget = aql_spin_budget(&wait_spin, spin_ns);
	spin_end = budget >= left ? deadline_ns : now + budget;
	/* Poll first: a sleep and wake-up costs microseconds. The clock is read
	 * (and the helpers run) every 64 polls so the loop stays on the cache
	 * line it watches; the helpers from the first, since the work they do
	 * may be all that the wait waits for (64 polls are about 2 us). */
	for (uint32_t i = 1; now < spin_end; i++) {
		aql_cpu_relax();
		if (any_met(n, conds, index, observed)) {
			if (adapt)
				aql_spin_learn(&wait_spin, spin_ns, 0);
			return AQL_OK;
		}
		if ((i & 63) == 1) {
			help_wait(n, conds, deadline_ns);	/* the next poll sees its work */
			now = aql_now_ns();
		}
	}
	st = wait_sleeping(n, conds, deadline_ns, index, observed);
	if (adapt && st == AQL_OK)
		aql_spin_learn(&wait_spin, spin_ns, aql_now_ns() - start);
	return st;
}

static const char *const cond_names[] = { "==", "!=", "<", ">=" };

static aql_status wait_hinted(uint32_t n, aql_signal *const *signals,
			      const enum aql_signal_condition *conds,
			      const int64_t *compares, uint64_t timeout_ns,
			      enum aql_wait_hint hint, uint32_t *index,
			      int64_t *observed)
{
	struct aql_wait_cond c[64];
	uint64_t spin;
	aql_status st;

	if (n == 0 || n > 64 || !signals)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"signal wait: %u signals given, 1 to 64 allowed", n);
	switch (hint) {
	case AQL_WAIT_ACTIVE: spin = UINT64_MAX; break;
	case AQL_WAIT_SPIN_BLOCK: spin = AQL_WAIT_SPIN_NS; break;
	case AQL_WAIT_BLOCKED: spin = 0; break;
	default:
		return aql_fail(AQL_ERR_INVALID_ARG, "signal wait: unknown hint %d", (int)hint);
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!signals[i] || (unsigned)conds[i] > AQL_COND_GTE)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"signal wait: entry %u has a NULL signal or unknown condition %d",
					i, (int)conds[i]);
		c[i] = (struct aql_wait_cond){ signals[i], -1, compares[i], conds[i] };
	}
	st = aql_wait_conds(n, c, aql_deadline(timeout_ns), spin, index, observed);
	if (st == AQL_ERR_TIMEOUT)
		return aql_fail(st, "signal wait timed out after %llu ns: signal %p has value %lld, waited for value %s %lld%s",
				(unsigned long long)timeout_ns, (void *)signals[0],
				(long long)aql_signal_load(signals[0], AQL_RELAXED),
				cond_names[conds[0]], (long long)compares[0],
				n > 1 ? " (first of several)" : "");
	return st;
}

aql_status aql_signal_wait(aql_signal *signal, enum aql_signal_condition cond,
			   int64_t compare, uint64_t timeout_ns,
			   enum aql_wait_hint hint, int64_t *observed)
{
	return wait_hinted(1, &signal, &cond, &compare, timeout_ns, hint, NULL, observed);
}

aql_status aql_signal_wait_any(uint32_t n, aql_signal *const *signals,
			       const enum aql_signal_condition *conds,
			       const int64_t *compares, uint64_t timeout_ns,
			       enum aql_wait_hint hint, uint32_t *index,
			       int64_t *observed)
{
	if (!conds || !compares)
		return aql_fail(AQL_ERR_INVALID_ARG, "signal wait: NULL condition array");
	return wait_hinted(n, signals, conds, compares, timeout_ns, hint, index, observed);
}
