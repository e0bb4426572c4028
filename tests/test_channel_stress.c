/* SPDX-License-Identifier: MIT */
/*
 * Channel stress: far more producers (CPU agent work-items on their own
 * worker threads) than cores, small rings that wrap thousands of times,
 * one consumer or two taking turns, and drop mode. Every message carries
 * its producer, a sequence number and a checksum: none may be lost,
 * duplicated, reordered or corrupted. Under TSan the kernels' own code
 * is not instrumented, so one round runs the same device functions
 * (aql/kernel_channel.h) on plain threads of this program, where it is.
 *
 *   test_channel_stress CHANNEL_KERNELS.host.so [MESSAGES_PER_PRODUCER]
 */
#include <poll.h>
#include <pthread.h>
#include <string.h>

#include "helpers.h"
#include "channel/host_producer.h"
#include "channel/verify.h"

#define PRODUCERS 128u	/* grids of 64 or fewer run on one thread */

static const char *co_path;
static uint32_t per_producer = 2000;

struct rig {
	aql_agent *agent;
	aql_queue *queue;
	aql_code_object *co;
	aql_buf *drops;
};

static struct rig rig_make(uint32_t workers)
{
	aql_host_agent_config ac = { .workers = workers };
	aql_queue_config qc = { .size = 64 };
	struct rig r = { 0 };

	CHECK_OK(aql_host_agent_create(&ac, &r.agent));
	CHECK_OK(aql_queue_create(r.agent, &qc, &r.queue));
	CHECK_OK(aql_code_object_load_file(r.agent, co_path, NULL, &r.co));
	CHECK_OK(aql_buf_create(AQL_TYPE(uint32_t), PRODUCERS, AQL_INOUT, NULL, &r.drops));
	if (!r.co || !r.drops)
		exit(1);
	return r;
}

static void rig_free(struct rig *r)
{
	CHECK_OK(aql_buf_destroy(r->drops));
	aql_code_object_destroy(r->co);
	CHECK_OK(aql_queue_destroy(r->queue));
	CHECK_OK(aql_agent_destroy(r->agent));
}

static aql_completion launch(struct rig *r, aql_channel *ch, const char *kernel,
			     uint32_t group, uint32_t count)
{
	aql_launch_config cfg = { .grid = { PRODUCERS }, .workgroup = { (uint16_t)group } };
	const aql_kernel *k = NULL;
	aql_completion done = { 0 };

	CHECK_OK(aql_code_object_kernel(r->co, kernel, &k));
	CHECK_OK(AQL_LAUNCH(r->queue, k, &cfg, &done, AQL_ARG(ch), AQL_ARG(count),
			    AQL_ARG(r->drops)));
	return done;
}

/* Host threads playing work-items: the device functions, instrumented. */
struct producer {
	uint64_t channel;
	uint32_t id;
	uint32_t count;
	uint32_t dropped;
	int *finished;		/* counts down to 0 */
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	p->dropped = chan_host_produce(p->channel, p->id, p->count);
	__atomic_fetch_sub(p->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

struct consumer {
	aql_channel *ch;
	aql_completion done;	/* the kernel's, or ... */
	int *finished;		/* ... the producer threads' count */
	struct chan_verify *v;
	aql_status st;
	char error[200];
};

static int producers_done(const struct consumer *c)
{
	return c->finished ? __atomic_load_n(c->finished, __ATOMIC_ACQUIRE) == 0
			   : aql_completion_done(c->done);
}

/*
 * Wait and drain until the producers are done and the ring is empty.
 * The first failure is kept for the main thread to check.
 */
static void *consume(void *arg)
{
	struct consumer *c = arg;
	uint64_t deadline = th_now_ns() + 20 * TH_TIMEOUT_NS;

	for (;;) {
		int finished = producers_done(c);

		c->st = aql_channel_drain(c->ch, 0, chan_verify_msg, c->v, NULL);
		if (finished || c->st)
			break;
		c->st = aql_channel_wait(c->ch, 2000000);
		if (c->st == AQL_ERR_TIMEOUT)
			c->st = AQL_OK;
		if (!c->st && th_now_ns() > deadline) {
			c->st = AQL_ERR_TIMEOUT;
			snprintf(c->error, sizeof(c->error), "the producers did not finish in time");
			return NULL;
		}
		if (c->st)
			break;
	}
	if (c->st)
		snprintf(c->error, sizeof(c->error), "%s", aql_error_message());
	return NULL;
}

/*
 * One round: kernel's work-items (or, kernel NULL, host threads) send
 * count messages each while consumers drain.
 */
static void run(const char *what, uint32_t workers, uint32_t slots, uint32_t flags,
		const char *kernel, uint32_t group, int consumers, uint32_t count)
{
	struct rig r = rig_make(workers);
	aql_channel_config cc = { .slot_size = 64, .slot_count = slots, .flags = flags };
	aql_channel *ch = NULL;
	struct chan_verify v;
	struct consumer c[2];
	struct producer prod[PRODUCERS];
	pthread_t t[2], pt[PRODUCERS];
	aql_completion done = { 0 };
	aql_channel_stats s;
	uint64_t dropped = 0, t0 = th_now_ns();
	int finished = PRODUCERS;

	CHECK_OK(aql_channel_create(r.agent, &cc, &ch));
	if (!ch)
		exit(1);
	chan_verify_init(&v, PRODUCERS, flags & AQL_CHANNEL_DROP);
	if (kernel)
		done = launch(&r, ch, kernel, group, count);
	else
		for (uint32_t p = 0; p < PRODUCERS; p++) {
			prod[p] = (struct producer){ aql_channel_device_address(ch), p, count,
						     0, &finished };
			CHECK(pthread_create(&pt[p], NULL, produce, &prod[p]) == 0,
			      "pthread_create");
		}
	for (int i = 0; i < consumers; i++) {
		c[i] = (struct consumer){ ch, done, kernel ? NULL : &finished, &v, AQL_OK, "" };
		CHECK(pthread_create(&t[i], NULL, consume, &c[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < consumers; i++) {
		pthread_join(t[i], NULL);
		CHECK(c[i].st == AQL_OK, "%s: consumer %d: %s", what, i, c[i].error);
	}
	if (kernel) {
		CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
		for (uint32_t p = 0; p < PRODUCERS; p++)
			dropped += aql_buf_data(r.drops, uint32_t)[p];
	} else {
		for (uint32_t p = 0; p < PRODUCERS; p++) {
			pthread_join(pt[p], NULL);
			dropped += prod[p].dropped;
		}
	}
	/* The last consumer may have seen "finished" before the other's drain. */
	CHECK_OK(aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL));
	s = aql_channel_get_stats(ch, &s) == AQL_OK ? s : (aql_channel_stats){ 0 };
	CHECK(v.errors == 0, "%s: %llu errors, first: %s", what, (unsigned long long)v.errors,
	      v.first_error);
	CHECK(v.received + dropped == (uint64_t)PRODUCERS * count,
	      "%s: received %llu + dropped %llu of %llu", what, (unsigned long long)v.received,
	      (unsigned long long)dropped, (unsigned long long)PRODUCERS * per_producer);
	CHECK(s.drops == dropped && s.sent == v.received && s.received == v.received,
	      "%s: stats sent %llu received %llu drops %llu", what, (unsigned long long)s.sent,
	      (unsigned long long)s.received, (unsigned long long)s.drops);
	if (!(flags & AQL_CHANNEL_DROP))
		for (uint32_t p = 0; p < PRODUCERS; p++)
			CHECK(v.next[p] == count, "%s: producer %u: %u of %u", what, p,
			      v.next[p], count);
	printf("%-40s %8llu received %8llu dropped %7llu full waits %6llu wake-ups %6.0f ms\n",
	       what, (unsigned long long)v.received, (unsigned long long)dropped,
	       (unsigned long long)s.full_waits, (unsigned long long)s.wakeups,
	       (double)(th_now_ns() - t0) / 1e6);
	chan_verify_fini(&v);
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

struct pinger {
	uint64_t channel;
	uint32_t count, sent;
	uint32_t ack;
};

static void *ping(void *arg)
{
	struct pinger *p = arg;

	p->sent = chan_host_ping(p->channel, p->count, &p->ack);
	return NULL;
}

struct acker {
	struct chan_verify *v;
	uint32_t *ack;
};

static int ack_msg(const aql_channel_msg *m, void *ctx)
{
	struct acker *a = ctx;
	int r = chan_verify_msg(m, a->v);

	__atomic_store_n(a->ack, (uint32_t)a->v->received, __ATOMIC_RELEASE);
	return r;
}

/*
 * Lost wake-ups: one message at a time, each sent only after the last was
 * received, after a pause that varies so that sends meet the consumer
 * announcing its sleep (aql_channel_arm) or asleep in poll(). A wake-up
 * lost runs the poll to its timeout, which fails. Whether some sends do
 * find it asleep depends on the scheduler: the count is printed.
 */
static void ping_pong(const char *what, uint32_t flags, uint32_t count)
{
	struct rig r = rig_make(1);
	aql_channel_config cc = { .flags = flags };
	struct pinger p = { 0 };
	struct chan_verify v;
	struct acker a = { &v, &p.ack };
	aql_channel *ch = NULL;
	aql_channel_stats s = { 0 };
	uint64_t t0 = th_now_ns(), sleeps = 0;
	pthread_t t;
	aql_status st;

	CHECK_OK(aql_channel_create(r.agent, &cc, &ch));
	if (!ch)
		exit(1);
	chan_verify_init(&v, 1, 0);
	p = (struct pinger){ aql_channel_device_address(ch), count, 0, 0 };
	CHECK(pthread_create(&t, NULL, ping, &p) == 0, "pthread_create");
	while (v.received < count && !v.errors) {
		if (aql_channel_arm(ch)) {
			struct pollfd pfd = { .fd = aql_channel_fd(ch), .events = POLLIN };

			sleeps++;
			if (poll(&pfd, 1, (int)(TH_TIMEOUT_NS / 1000000)) != 1) {
				CHECK(0, "%s: message %llu: no wake-up within %llu ms", what,
				      (unsigned long long)v.received,
				      (unsigned long long)(TH_TIMEOUT_NS / 1000000));
				break;
			}
		}
		st = aql_channel_drain(ch, 0, ack_msg, &a, NULL);
		CHECK(st == AQL_OK, "%s: %s", what, aql_error_message());
		if (st != AQL_OK)
			break;
	}
	__atomic_store_n(&p.ack, UINT32_MAX, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK_OK(aql_channel_get_stats(ch, &s));
	CHECK(v.errors == 0 && v.received == count && p.sent == count,
	      "%s: %llu of %u received, %u sent: %s", what, (unsigned long long)v.received,
	      count, p.sent, v.first_error);
	CHECK(s.wakeups <= count, "%s: %llu wake-ups for %u messages", what,
	      (unsigned long long)s.wakeups, count);
	printf("%-40s %8llu received %8llu sleeps %10llu wake-ups %6.0f ms\n",
	       what, (unsigned long long)v.received, (unsigned long long)sleeps,
	       (unsigned long long)s.wakeups, (double)(th_now_ns() - t0) / 1e6);
	chan_verify_fini(&v);
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_channel_stress CHANNEL_KERNELS.host.so [MESSAGES]\n");
		return 2;
	}
	co_path = argv[1];
	if (argc > 2)
		per_producer = (uint32_t)strtoul(argv[2], NULL, 0);
	/* Host threads outnumbering the slots sleep for room on every send:
	 * fewer messages keep the round short under TSan. */
	const uint32_t n = per_producer, few = per_producer / 8;

	run("128 producers, 256 slots, 1 consumer", PRODUCERS, 256, 0, "chan_seq", 1, 1, n);
	run("128 producers, 16 slots, 2 consumers", PRODUCERS, 16, 0, "chan_seq", 1, 2, n);
	run("8 groups of 16, 64 slots, group sends", 8, 64, 0, "chan_group", 16, 1, n);
	run("128 producers, 32 slots, drop mode", PRODUCERS, 32, AQL_CHANNEL_DROP, "chan_seq", 1,
	    1, n);
	run("128 host threads, 64 slots, 2 consumers", 1, 64, 0, NULL, 1, 2, few);
	run("128 host threads, 256 slots, drop mode", 1, 256, AQL_CHANNEL_DROP, NULL, 1, 1, n);
	ping_pong("ping-pong, membarrier handshake", 0, n);
	ping_pong("ping-pong, senders fence", AQL_CHANNEL_FENCE, n);
	return th_finish();
}
