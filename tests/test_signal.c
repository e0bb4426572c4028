/* SPDX-License-Identifier: MIT */
/* Signals: every op and order, waits that succeed and that time out, and
 * cross-thread wake-ups that would hang or time out if one were lost. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "helpers.h"

static const enum aql_memory_order orders[] = { AQL_RELAXED, AQL_ACQUIRE, AQL_RELEASE,
						AQL_ACQ_REL };

static void test_ops(void)
{
	aql_signal *s = th_signal(5);

	CHECK(s->kind == AQL_SIGNAL_KIND_USER, "kind %lld", (long long)s->kind);
	CHECK(((uintptr_t)s & 63) == 0, "signal %p not 64-byte aligned", (void *)s);
	CHECK(aql_signal_from_handle(aql_signal_handle(s)) == s, "handle round trip");
	for (unsigned i = 0; i < 4; i++) {
		enum aql_memory_order o = orders[i];

		aql_signal_store(s, 12, o);
		CHECK(aql_signal_load(s, o) == 12, "store/load order %u", i);
		CHECK(aql_signal_add(s, 3, o) == 12 && s->value == 15, "add order %u", i);
		CHECK(aql_signal_sub(s, 5, o) == 15 && s->value == 10, "sub order %u", i);
		CHECK(aql_signal_and(s, 6, o) == 10 && s->value == 2, "and order %u", i);
		CHECK(aql_signal_or(s, 5, o) == 2 && s->value == 7, "or order %u", i);
		CHECK(aql_signal_xor(s, 3, o) == 7 && s->value == 4, "xor order %u", i);
		CHECK(aql_signal_exchange(s, -9, o) == 4 && s->value == -9, "exchange order %u", i);
		CHECK(aql_signal_cas(s, -9, 21, o) == -9 && s->value == 21, "cas hit order %u", i);
		CHECK(aql_signal_cas(s, 0, 99, o) == 21 && s->value == 21, "cas miss order %u", i);
	}
	aql_signal_destroy(s);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_conditions(void)
{
	aql_signal *s = th_signal(7);
	int64_t v = 0;

	CHECK_OK(aql_signal_wait(s, AQL_COND_EQ, 7, 0, AQL_WAIT_ACTIVE, &v));
	CHECK(v == 7, "observed %lld", (long long)v);
	CHECK_OK(aql_signal_wait(s, AQL_COND_NE, 3, 0, AQL_WAIT_BLOCKED, NULL));
	CHECK_OK(aql_signal_wait(s, AQL_COND_LT, 8, 0, AQL_WAIT_SPIN_BLOCK, NULL));
	CHECK_OK(aql_signal_wait(s, AQL_COND_GTE, 7, 0, AQL_WAIT_ACTIVE, NULL));
	CHECK(aql_signal_wait(s, AQL_COND_GTE, 8, 0, AQL_WAIT_ACTIVE, NULL) == AQL_ERR_TIMEOUT,
	      "GTE 8 must not hold for 7");
	CHECK(aql_signal_wait(s, 9, 0, 0, AQL_WAIT_ACTIVE, NULL) == AQL_ERR_INVALID_ARG,
	      "unknown condition accepted");
	CHECK(aql_signal_wait(s, AQL_COND_EQ, 7, 0, 9, NULL) == AQL_ERR_INVALID_ARG,
	      "unknown hint accepted");
	aql_signal_destroy(s);
}

static void test_timeouts(void)
{
	static const enum aql_wait_hint hints[] = { AQL_WAIT_ACTIVE, AQL_WAIT_SPIN_BLOCK,
						    AQL_WAIT_BLOCKED };
	aql_signal *s = th_signal(1);

	for (unsigned i = 0; i < 3; i++) {
		uint64_t t0 = now_ns(), dt;
		aql_status st = aql_signal_wait(s, AQL_COND_EQ, 0, 30000000, hints[i], NULL);

		dt = now_ns() - t0;
		CHECK(st == AQL_ERR_TIMEOUT, "hint %u: %s", i, aql_status_str(st));
		CHECK(dt >= 30000000, "hint %u returned after %llu ns, before its timeout", i,
		      (unsigned long long)dt);
		CHECK(strstr(aql_error_message(), "timed out") &&
			      strstr(aql_error_message(), "has value 1"),
		      "message: %s", aql_error_message());
		CHECK(s->waiters == 0, "hint %u left %u waiters registered", i, s->waiters);
	}
	aql_signal_destroy(s);
}

struct delayed {
	aql_signal *s;
	unsigned ms;
	int64_t value;
};

static void *store_later(void *arg)
{
	struct delayed *d = arg;

	th_sleep_ms(d->ms);
	aql_signal_store(d->s, d->value, AQL_RELEASE);
	return NULL;
}

/* A sleeping waiter must be woken by a store from another thread. */
static void test_wake(void)
{
	static const enum aql_wait_hint hints[] = { AQL_WAIT_ACTIVE, AQL_WAIT_SPIN_BLOCK,
						    AQL_WAIT_BLOCKED };
	for (unsigned i = 0; i < 3; i++) {
		struct delayed d = { th_signal(1), 20, 0 };
		pthread_t t;
		int64_t v = 1;

		pthread_create(&t, NULL, store_later, &d);
		CHECK_DONE(aql_signal_wait(d.s, AQL_COND_EQ, 0, TH_TIMEOUT_NS, hints[i], &v));
		CHECK(v == 0, "hint %u observed %lld", i, (long long)v);
		pthread_join(t, NULL);
		aql_signal_destroy(d.s);
	}
}

static void test_wait_any(void)
{
	aql_signal *s[3] = { th_signal(1), th_signal(1), th_signal(1) };
	enum aql_signal_condition conds[3] = { AQL_COND_EQ, AQL_COND_EQ, AQL_COND_GTE };
	int64_t cmp[3] = { 0, 0, 5 };
	struct delayed d = { s[2], 20, 6 };
	uint32_t index = 99;
	int64_t v = 0;
	pthread_t t;

	pthread_create(&t, NULL, store_later, &d);
	CHECK_DONE(aql_signal_wait_any(3, s, conds, cmp, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED,
				     &index, &v));
	CHECK(index == 2 && v == 6, "index %u value %lld", index, (long long)v);
	pthread_join(t, NULL);
	CHECK(aql_signal_wait_any(2, s, conds, cmp, 1000000, AQL_WAIT_BLOCKED, &index, NULL) ==
		      AQL_ERR_TIMEOUT, "none of two unset signals may satisfy");
	CHECK(aql_signal_wait_any(0, s, conds, cmp, 0, AQL_WAIT_ACTIVE, NULL, NULL) ==
		      AQL_ERR_INVALID_ARG, "zero signals accepted");
	for (int i = 0; i < 3; i++)
		aql_signal_destroy(s[i]);
}

/*
 * Two threads hand a token back and forth, each sleeping at once. A lost
 * wake-up leaves one side asleep until its timeout, which fails the test.
 */
#define PINGPONG_ROUNDS 20000

struct pingpong {
	aql_signal *s;
	unsigned lost;
};

static void *pong(void *arg)
{
	struct pingpong *pp = arg;

	for (int64_t i = 1; i <= PINGPONG_ROUNDS; i++) {
		if (aql_signal_wait(pp->s, AQL_COND_EQ, 2 * i - 1, TH_TIMEOUT_NS,
				    AQL_WAIT_BLOCKED, NULL) != AQL_OK) {
			pp->lost++;
			return NULL;
		}
		aql_signal_store(pp->s, 2 * i, AQL_RELEASE);
	}
	return NULL;
}

static void test_no_lost_wakeups(void)
{
	struct pingpong pp = { th_signal(0), 0 };
	unsigned lost = 0;
	pthread_t t;

	pthread_create(&t, NULL, pong, &pp);
	for (int64_t i = 1; i <= PINGPONG_ROUNDS && !lost; i++) {
		aql_signal_store(pp.s, 2 * i - 1, AQL_RELEASE);
		if (aql_signal_wait(pp.s, AQL_COND_EQ, 2 * i, TH_TIMEOUT_NS,
				    AQL_WAIT_BLOCKED, NULL) != AQL_OK)
			lost++;
	}
	pthread_join(t, NULL);
	CHECK(lost == 0 && pp.lost == 0, "lost wake-ups: main %u, partner %u", lost, pp.lost);
	CHECK(pp.s->value == 2 * PINGPONG_ROUNDS, "final value %lld", (long long)pp.s->value);
	aql_signal_destroy(pp.s);
}

/*
 * Two updaters per step and one sleeping waiter: the waiter, woken by the
 * first add, must not go back to sleep past the second (a wake protocol
 * that lets the first wake take the "asleep" mark of the next sleep loses
 * the second add's wake). A wait whose wake was lost sleeps to its
 * deadline and then finds the value met, so a wait that lasted that long
 * is the failure; a wake that arrives takes milliseconds at worst.
 */
#define TWO_UPDATER_STEPS 20000
#define LOST_WAKE_NS (10ull * 1000000000ull)

struct two_updaters {
	aql_signal *s;
	int64_t ack;
	int64_t stop;
};

static void *add_per_step(void *arg)
{
	struct two_updaters *tu = arg;

	for (int64_t i = 1; i <= TWO_UPDATER_STEPS; i++) {
		while (__atomic_load_n(&tu->ack, __ATOMIC_ACQUIRE) < i - 1)
			if (__atomic_load_n(&tu->stop, __ATOMIC_RELAXED))
				return NULL;
			else
				sched_yield();
		aql_signal_add(tu->s, 1, AQL_RELEASE);
	}
	return NULL;
}

static void test_two_updaters(void)
{
	struct two_updaters tu = { th_signal(0), 0, 0 };
	pthread_t t[2];
	int64_t i;

	for (int k = 0; k < 2; k++)
		pthread_create(&t[k], NULL, add_per_step, &tu);
	for (i = 1; i <= TWO_UPDATER_STEPS; i++) {
		uint64_t start = now_ns();

		if (aql_signal_wait(tu.s, AQL_COND_GTE, 2 * i, LOST_WAKE_NS,
				    AQL_WAIT_BLOCKED, NULL) != AQL_OK ||
		    now_ns() - start >= LOST_WAKE_NS)
			break;
		__atomic_store_n(&tu.ack, i, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&tu.stop, 1, __ATOMIC_RELAXED);
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	CHECK(i > TWO_UPDATER_STEPS, "lost wake-up at step %lld: the wait for %lld slept "
	      "to its deadline (value now %lld)", (long long)i, (long long)(2 * i),
	      (long long)tu.s->value);
	aql_signal_destroy(tu.s);
}

/*
 * A sleeper is woken only by a store that may meet its condition: a
 * program waiting for the last of many launches sleeps on a counter that
 * every launch before it decrements. The waiter counts the times it went
 * to sleep (voluntary context switches); a wake per decrement would make
 * that about COUNTDOWN.
 */
#define COUNTDOWN 200

struct countdown {
	aql_signal *s;
	int64_t below;
	aql_status st;
	int64_t seen;
	long sleeps;
};

static void *wait_below(void *arg)
{
	struct countdown *c = arg;
	struct rusage before, after;

	getrusage(RUSAGE_THREAD, &before);
	c->st = aql_signal_wait(c->s, AQL_COND_LT, c->below, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED,
				&c->seen);
	getrusage(RUSAGE_THREAD, &after);
	c->sleeps = after.ru_nvcsw - before.ru_nvcsw;
	return NULL;
}

static void test_wake_when_met(void)
{
	const struct timespec gap = { 0, 200000 };
	struct countdown c = { th_signal(COUNTDOWN), 1, AQL_OK, 0, 0 };
	pthread_t t;

	pthread_create(&t, NULL, wait_below, &c);
	for (int i = 0; i < COUNTDOWN; i++) {
		nanosleep(&gap, NULL);
		aql_signal_sub(c.s, 1, AQL_RELEASE);
	}
	pthread_join(t, NULL);
	CHECK_DONE(c.st);
	CHECK(c.seen == 0, "observed %lld", (long long)c.seen);
	CHECK(c.sleeps < COUNTDOWN / 4, "the waiter for value < 1 slept %ld times over %d "
	      "decrements: woken by stores that could not meet its condition", c.sleeps,
	      COUNTDOWN);
	aql_signal_destroy(c.s);
}

/*
 * Sleepers with different thresholds on one counter, two threads counting
 * it down: each must wake once its own threshold is passed (a store that
 * skipped a sleeper whose condition it met would leave it asleep until
 * its timeout).
 */
#define THRESHOLDS 4

static void *count_down(void *arg)
{
	aql_signal *s = arg;

	for (int i = 0; i < COUNTDOWN / 2; i++) {
		aql_signal_sub(s, 1, AQL_RELEASE);
		if (i % 8 == 0)
			sched_yield();
	}
	return NULL;
}

static void test_thresholds(void)
{
	for (int round = 0; round < 50; round++) {
		aql_signal *s = th_signal(COUNTDOWN);
		struct countdown c[THRESHOLDS];
		pthread_t w[THRESHOLDS], d[2];

		for (int i = 0; i < THRESHOLDS; i++) {
			c[i] = (struct countdown){ s, COUNTDOWN * i / THRESHOLDS + 1, AQL_OK, 0, 0 };
			pthread_create(&w[i], NULL, wait_below, &c[i]);
		}
		for (int k = 0; k < 2; k++)
			pthread_create(&d[k], NULL, count_down, s);
		for (int k = 0; k < 2; k++)
			pthread_join(d[k], NULL);
		for (int i = 0; i < THRESHOLDS; i++) {
			pthread_join(w[i], NULL);
			CHECK(c[i].st == AQL_OK && c[i].seen < c[i].below,
			      "round %d: the wait for value < %lld returned %d, observed %lld",
			      round, (long long)c[i].below, (int)c[i].st, (long long)c[i].seen);
		}
		aql_signal_destroy(s);
	}
}

int main(void)
{
	test_ops();
	test_conditions();
	test_timeouts();
	test_wake();
	test_wait_any();
	test_no_lost_wakeups();
	test_two_updaters();
	test_wake_when_met();
	test_thresholds();
	return th_finish();
}
