/* SPDX-License-Identifier: MIT */
/*
 * Channels (aql/channel.h, aql/kernel_channel.h): producers are work-items
 * of tests/channel/kernels.c on CPU agents, or on the NVIDIA agent as PTX
 * with AQL_TEST_AGENT=nvidia (helpers.h). Configuration errors, order
 * and content, variable sizes across the ring's end, backpressure, drop
 * mode, work-group aggregated sends, waits, timeouts and the eventfd with
 * io_uring, handlers, RPC, the serve thread, a malformed header, and the
 * launch's checks of channel arguments.
 */
#include <liburing.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "channel/verify.h"

static const char *co_path;

/*
 * A CPU agent with workers threads, a queue and the kernels on it; on the
 * NVIDIA agent, a queue and the PTX on it.
 */
struct rig {
	aql_agent *agent;
	aql_queue *queue;
	aql_code_object *co;
};

static struct rig rig_make(uint32_t workers)
{
	aql_host_agent_config ac = { .workers = workers };
	aql_queue_config qc = { .size = 256 };
	struct rig r = { 0 };

	if (th_test_gpu())
		r.agent = th_test_agent();
	else
		CHECK_OK(aql_host_agent_create(&ac, &r.agent));
	/* The kernels before the queue: a resident one (AQL_TEST_RESIDENT=1)
	 * runs those loaded before it was created. */
	CHECK_OK(aql_code_object_load_file(r.agent, co_path, NULL, &r.co));
	if (!r.co)
		exit(1);
	if (th_test_gpu())
		r.queue = th_test_queue(qc.size, AQL_QUEUE_MULTI, 0);
	else
		CHECK_OK(aql_queue_create(r.agent, &qc, &r.queue));
	return r;
}

static void rig_free(struct rig *r)
{
	CHECK_OK(aql_code_object_destroy(r->co));
	CHECK_OK(aql_queue_destroy(r->queue));
	if (!th_test_gpu())
		CHECK_OK(aql_agent_destroy(r->agent));
}

static aql_channel *chan(aql_agent *agent, uint32_t slot_size, uint32_t count, uint32_t flags,
			 uint32_t replies)
{
	aql_channel_config c = { slot_size, count, flags, replies, 0 };
	aql_channel *ch = NULL;

	CHECK_OK(aql_channel_create(agent, &c, &ch));
	if (!ch)
		exit(1);
	return ch;
}

#define u32_buf(n) th_buf(AQL_TYPE(uint32_t), (n))
#define i32_buf(n) th_buf(AQL_TYPE(int32_t), (n))

static aql_channel_stats stats(aql_channel *ch)
{
	aql_channel_stats s = { 0 };

	CHECK_OK(aql_channel_get_stats(ch, &s));
	return s;
}

/* Drain into fn while the launch runs, then once more after it ended. */
static void consume(aql_channel *ch, aql_completion done, aql_channel_fn fn, void *ctx)
{
	uint64_t deadline = th_now_ns() + 3 * TH_TIMEOUT_NS;

	for (;;) {
		int finished = aql_completion_done(done);
		aql_status st;

		CHECK_OK(aql_channel_drain(ch, 0, fn, ctx, NULL));
		if (finished)
			break;
		st = aql_channel_wait(ch, 1000000);
		CHECK(st == AQL_OK || st == AQL_ERR_TIMEOUT, "wait: %s", aql_error_message());
		if (th_now_ns() > deadline) {
			CHECK(0, "the producers did not finish");
			break;
		}
	}
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
}

static aql_completion run_seq(struct rig *r, aql_channel *ch, uint32_t producers,
			      uint32_t count, aql_buf *drops)
{
	aql_launch_config cfg = { .grid = { producers }, .workgroup = { 1 } };
	aql_completion done = { 0 };

	CHECK_OK(AQL_LAUNCH(r->queue, th_kernel(r->co, "chan_seq"), &cfg, &done, AQL_ARG(ch),
			    AQL_ARG(count), AQL_ARG(drops)));
	return done;
}

static void test_config_errors(void)
{
	static const struct {
		aql_channel_config c;
		const char *needle;
	} bad[] = {
		{ { 100, 0, 0, 0, 0 }, "slot_size 100" },
		{ { 0, 3, 0, 0, 0 }, "slot_count 3" },
		{ { 0, 1, 0, 0, 0 }, "slot_count 1" },
		{ { 0, 0, 8, 0, 0 }, "unknown bits 0x8" },
		{ { 0, 0, 0, 3, 0 }, "reply_slots 3" },
		{ { 0, 0, 0, 4, 96 }, "reply_size 96" },
	};
	aql_channel *ch = (aql_channel *)1;
	aql_channel_stats s;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		aql_status st = aql_channel_create(th_agent(), &bad[i].c, &ch);

		CHECK(st == AQL_ERR_INVALID_ARG && !ch, "config %zu accepted", i);
		CHECK(th_error_has(bad[i].needle), "config %zu: \"%s\" not in \"%s\"", i,
		      bad[i].needle, aql_error_message());
	}
	CHECK(aql_channel_create(NULL, NULL, &ch) == AQL_ERR_INVALID_ARG, "NULL agent");
	CHECK(aql_channel_drain(NULL, 0, NULL, NULL, NULL) == AQL_ERR_INVALID_ARG, "NULL drain");
	CHECK(aql_channel_get_stats(NULL, &s) == AQL_ERR_INVALID_ARG, "NULL stats");
	CHECK_OK(aql_channel_destroy(NULL));
	ch = chan(th_agent(), 0, 0, 0, 0);
	CHECK(aql_channel_set_handler(ch, 0, chan_verify_msg, NULL) == AQL_ERR_INVALID_ARG,
	      "a handler for kind 0");
	CHECK(aql_channel_register_rpc(ch, 1, NULL, NULL) == AQL_ERR_INVALID_ARG &&
	      th_error_has("without reply slots"), "RPC without reply slots: %s",
	      aql_error_message());
	CHECK_OK(aql_channel_destroy(ch));
}

/* Several producers, a consumer draining while they run: all in order. */
static void test_order(void)
{
	struct rig r = rig_make(4);
	aql_channel *ch = chan(r.agent, 64, 1024, 0, 0);
	aql_buf *drops = u32_buf(8);
	struct chan_verify v;
	aql_channel_stats s;

	chan_verify_init(&v, 8, 0);
	consume(ch, run_seq(&r, ch, 8, 5000, drops), chan_verify_msg, &v);
	CHECK(v.errors == 0, "%llu errors, first: %s", (unsigned long long)v.errors, v.first_error);
	for (uint32_t p = 0; p < 8; p++)
		CHECK(v.next[p] == 5000, "producer %u: %u of 5000 received", p, v.next[p]);
	s = stats(ch);
	CHECK(s.sent == 40000 && s.received == 40000 && s.drops == 0,
	      "sent %llu received %llu drops %llu", (unsigned long long)s.sent,
	      (unsigned long long)s.received, (unsigned long long)s.drops);
	chan_verify_fini(&v);
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* A ring of 4 slots and a consumer that dawdles: senders wait, lose nothing. */
struct slow {
	struct chan_verify v;
	unsigned n;
};

static int slow_consumer(const aql_channel_msg *m, void *ctx)
{
	struct slow *s = ctx;

	if (++s->n % 64 == 0)
		th_sleep_ms(1);
	return chan_verify_msg(m, &s->v);
}

static void test_backpressure(void)
{
	struct rig r = rig_make(3);
	aql_channel *ch = chan(r.agent, 64, 4, 0, 0);
	aql_buf *drops = u32_buf(3);
	struct slow slow = { .n = 0 };
	aql_channel_stats s;

	chan_verify_init(&slow.v, 3, 0);
	consume(ch, run_seq(&r, ch, 3, 1000, drops), slow_consumer, &slow);
	CHECK(slow.v.errors == 0 && slow.v.received == 3000, "%llu received, %llu errors: %s",
	      (unsigned long long)slow.v.received, (unsigned long long)slow.v.errors,
	      slow.v.first_error);
	s = stats(ch);
	CHECK(s.full_waits > 0, "no sender waited on a 4-slot ring");
	CHECK(s.drops == 0 && s.sent == 3000, "drops %llu sent %llu",
	      (unsigned long long)s.drops, (unsigned long long)s.sent);
	chan_verify_fini(&slow.v);
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* Drop mode: a full channel drops and counts; what arrives is in order. */
static void test_drop_mode(void)
{
	struct rig r = rig_make(4);
	aql_channel *ch = chan(r.agent, 64, 8, AQL_CHANNEL_DROP, 0);
	aql_buf *drops = u32_buf(4);
	const uint32_t *d;
	struct chan_verify v;
	aql_channel_stats s;
	uint64_t dropped = 0;
	aql_completion done;

	/* Nobody drains during the launch: exactly the ring's 8 get in. */
	done = run_seq(&r, ch, 4, 500, drops);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	d = aql_buf_data(drops, uint32_t);
	for (int p = 0; p < 4; p++)
		dropped += d[p];
	s = stats(ch);
	CHECK(dropped == 2000 - 8 && s.drops == dropped && s.sent == 8,
	      "dropped %llu (counted %llu), sent %llu", (unsigned long long)dropped,
	      (unsigned long long)s.drops, (unsigned long long)s.sent);
	chan_verify_init(&v, 4, 1);
	CHECK_OK(aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL));
	CHECK(v.received == 8 && v.errors == 0, "%llu received: %s",
	      (unsigned long long)v.received, v.first_error);
	chan_verify_fini(&v);

	/* Drained while it runs: received + dropped = sent, order kept. */
	chan_verify_init(&v, 4, 1);
	consume(ch, run_seq(&r, ch, 4, 5000, drops), chan_verify_msg, &v);
	dropped = 0;
	d = aql_buf_data(drops, uint32_t);
	for (int p = 0; p < 4; p++)
		dropped += d[p];
	s = stats(ch);
	CHECK(v.errors == 0, "%s", v.first_error);
	CHECK(v.received + dropped == 20000 && s.drops == 2000 - 8 + dropped,
	      "received %llu + dropped %llu != 20000 (counted %llu)",
	      (unsigned long long)v.received, (unsigned long long)dropped,
	      (unsigned long long)s.drops);
	CHECK(s.full_waits == 0, "a drop-mode sender waited");
	chan_verify_fini(&v);
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* Sizes 0..700 over 64-byte slots of a 32-slot ring: spans and wraps. */
struct sizes_check {
	uint32_t producers, max;
	uint32_t next[4];
	uint64_t received, errors, kind3, wrapped;
	uint32_t slot_count;
};

static int check_sizes(const aql_channel_msg *m, void *ctx)
{
	struct sizes_check *c = ctx;
	uint32_t p, i, n;
	const uint8_t *b;

	if (!m)
		return 0;	/* the end of a drain's batch */
	p = m->kind - AQL_CHANNEL_KIND_USER;
	b = m->data;
	c->received++;
	if (m->kind == AQL_CHANNEL_KIND_USER + 3)
		c->kind3++;
	/* The payload runs past the ring's last slot. */
	if ((m->ticket % c->slot_count) + AQL_CHANNEL_SLOTS(m->size, 64) > c->slot_count)
		c->wrapped++;
	if (p >= c->producers) {
		c->errors++;
		return 0;
	}
	i = c->next[p]++;
	n = chan_size_of(p, i, c->max);
	if (m->size != n) {
		c->errors++;
		return 0;
	}
	for (uint32_t j = 0; j < n; j++)
		if (b[j] != chan_byte(p, i, j)) {
			c->errors++;
			break;
		}
	return 0;
}

static void test_sizes(void)
{
	struct rig r = rig_make(4);
	aql_channel *ch = chan(r.agent, 64, 32, 0, 0);
	aql_buf *res = u32_buf(4);
	aql_launch_config cfg = { .grid = { 4 }, .workgroup = { 1 } };
	struct sizes_check c = { .producers = 4, .max = CHAN_SIZES_MAX, .slot_count = 32 };
	struct sizes_check k3 = { .producers = 4, .max = CHAN_SIZES_MAX, .slot_count = 32 };
	aql_completion done;

	/* Kind USER+3 (producer 3) goes to its handler, the rest to the callback. */
	CHECK_OK(aql_channel_set_handler(ch, AQL_CHANNEL_KIND_USER + 3, check_sizes, &k3));
	CHECK_OK(AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_sizes"), &cfg, &done, AQL_ARG(ch),
			    AQL_ARG(300u), AQL_ARG(CHAN_SIZES_MAX), AQL_ARG(res)));
	consume(ch, done, check_sizes, &c);
	CHECK(c.errors == 0 && k3.errors == 0, "%llu + %llu bad messages",
	      (unsigned long long)c.errors, (unsigned long long)k3.errors);
	CHECK(c.received == 900 && c.kind3 == 0 && k3.received == 300 && k3.kind3 == 300,
	      "callback %llu (kind 3: %llu), handler %llu", (unsigned long long)c.received,
	      (unsigned long long)c.kind3, (unsigned long long)k3.received);
	CHECK(c.wrapped + k3.wrapped > 10, "only %llu messages wrapped",
	      (unsigned long long)(c.wrapped + k3.wrapped));
	for (int p = 0; p < 4; p++)
		CHECK(aql_buf_data(res, uint32_t)[p] == 0, "producer %d: a send failed", p);
	CHECK_OK(aql_buf_destroy(res));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

static int take_size(const aql_channel_msg *m, void *ctx)
{
	*(uint32_t *)ctx = m->size;
	return 0;
}

/* The largest message is slot_count * slot_size - 8; one byte more is refused. */
static void test_limit(void)
{
	struct rig r = rig_make(1);
	aql_channel *ch = chan(r.agent, 64, 8, 0, 0);
	aql_buf *res = i32_buf(2);
	aql_launch_config cfg = { .grid = { 1 } };
	aql_completion done;
	uint32_t size = 0, n = 0;

	CHECK_OK(AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_limit"), &cfg, &done, AQL_ARG(ch),
			    AQL_ARG(8u * 64 - 8), AQL_ARG(res)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(aql_buf_data(res, int32_t)[0] == AQL_CHANNEL_TOO_BIG, "505 bytes: %d",
	      aql_buf_data(res, int32_t)[0]);
	CHECK(aql_buf_data(res, int32_t)[1] == AQL_CHANNEL_SENT, "504 bytes: %d",
	      aql_buf_data(res, int32_t)[1]);
	CHECK_OK(aql_channel_drain(ch, 0, take_size, &size, &n));
	CHECK(n == 1 && size == 504, "%u messages, size %u", n, size);
	CHECK_OK(aql_buf_destroy(res));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* Group sends: each group's round takes consecutive tickets, in local id order. */
struct group_check {
	struct chan_verify v;
	uint64_t base_errors;
};

static int check_group(const aql_channel_msg *m, void *ctx)
{
	struct group_check *g = ctx;
	struct chan_msg c;

	/* Work-groups of 16 reserve 16 slots at a multiple of 16 from
	 * their first ticket; local id = ticket offset. */
	if (m->size == sizeof(c)) {
		memcpy(&c, m->data, sizeof(c));
		if ((m->ticket - c.producer % 16) % 16 != 0)
			g->base_errors++;
	}
	return chan_verify_msg(m, &g->v);
}

static void test_group(void)
{
	struct rig r = rig_make(2);
	aql_channel *ch = chan(r.agent, 64, 256, 0, 0);
	aql_buf *drops = u32_buf(64);
	aql_launch_config cfg = { .grid = { 64 }, .workgroup = { 16 } };
	struct group_check g = { .base_errors = 0 };
	aql_completion done;
	aql_channel_stats s;

	chan_verify_init(&g.v, 64, 0);
	CHECK_OK(AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_group"), &cfg, &done, AQL_ARG(ch),
			    AQL_ARG(200u), AQL_ARG(drops)));
	consume(ch, done, check_group, &g);
	CHECK(g.v.errors == 0 && g.v.received == 64 * 200, "%llu received: %s",
	      (unsigned long long)g.v.received, g.v.first_error);
	CHECK(g.base_errors == 0, "%llu messages off their group's ticket block",
	      (unsigned long long)g.base_errors);
	chan_verify_fini(&g.v);
	CHECK_OK(aql_channel_destroy(ch));

	/* Drop mode: a group that does not fit is dropped whole, and counted. */
	ch = chan(r.agent, 64, 32, AQL_CHANNEL_DROP, 0);
	CHECK_OK(AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_group"), &cfg, &done, AQL_ARG(ch),
			    AQL_ARG(4u), AQL_ARG(drops)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	s = stats(ch);
	CHECK(s.sent == 32 && s.drops == 64 * 4 - 32, "sent %llu drops %llu",
	      (unsigned long long)s.sent, (unsigned long long)s.drops);
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* Timeouts, a wake-up, and wake-ups only when the consumer said it sleeps. */
static void test_wait(void)
{
	struct rig r = rig_make(1);
	aql_channel *ch = chan(r.agent, 64, 4096, 0, 0);
	aql_buf *drops = u32_buf(1);
	struct chan_verify v;
	aql_channel_stats s;
	uint64_t t0, arms = 0;
	aql_completion done;
	aql_status st;

	t0 = th_now_ns();
	st = aql_channel_wait(ch, 3000000);
	CHECK(st == AQL_ERR_TIMEOUT && th_error_has("no message"), "empty wait: %s",
	      aql_status_str(st));
	CHECK(th_now_ns() - t0 >= 3000000, "the wait ended early");
	CHECK(stats(ch).wakeups == 0, "a wake-up with no sender");

	/* A single producer; the consumer sleeps whenever the ring is empty. */
	chan_verify_init(&v, 1, 0);
	done = run_seq(&r, ch, 1, 20000, drops);
	t0 = th_now_ns() + 3 * TH_TIMEOUT_NS;
	while (!aql_completion_done(done) || v.received < 20000) {
		if (th_now_ns() > t0) {
			CHECK(0, "%llu of 20000 received", (unsigned long long)v.received);
			break;
		}
		/* Counted whatever it returns: a sender may see the announcement
		 * of an arm that then finds its message, and wake anyway. */
		arms++;
		if (aql_channel_arm(ch)) {
			struct pollfd p = { .fd = aql_channel_fd(ch), .events = POLLIN };

			poll(&p, 1, 5);
		}
		CHECK_OK(aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL));
		if (v.errors)
			break;
	}
	s = stats(ch);
	CHECK(v.errors == 0 && v.received == 20000, "%s", v.first_error);
	CHECK(s.wakeups <= arms && s.wakeups < 20000, "%llu wake-ups for %llu arms",
	      (unsigned long long)s.wakeups, (unsigned long long)arms);
	chan_verify_fini(&v);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));

	/* A long wait that a late message ends. */
	done = run_seq(&r, ch, 1, 1, drops);
	t0 = th_now_ns();
	CHECK_DONE(aql_channel_wait(ch, TH_TIMEOUT_NS));
	CHECK(th_now_ns() - t0 < TH_TIMEOUT_NS, "the wait ran to its timeout");
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	chan_verify_init(&v, 1, 1);
	CHECK_OK(aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL));
	CHECK(v.received == 1, "%llu received", (unsigned long long)v.received);
	chan_verify_fini(&v);
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* The eventfd in an io_uring loop: a POLL_ADD completes on the first send. */
static void test_io_uring(void)
{
	if (th_test_gpu()) {
		th_skip("the eventfd in an io_uring loop", "GPU senders cannot write the eventfd");
		return;
	}

	struct rig r = rig_make(1);
	aql_channel *ch = chan(r.agent, 64, 64, 0, 0);
	aql_buf *drops = u32_buf(1);
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = 20000000 };
	struct chan_verify v;
	aql_completion done;
	int e;

	e = io_uring_queue_init(4, &ring, 0);
	if (e < 0) {
		printf("io_uring unavailable (%s): eventfd loop test skipped\n", strerror(-e));
		goto out;
	}
	CHECK(aql_channel_arm(ch) == 1, "arming an empty channel");
	io_uring_prep_poll_add(io_uring_get_sqe(&ring), aql_channel_fd(ch), POLLIN);
	io_uring_submit(&ring);
	/* Nothing sent: the poll must not complete. */
	CHECK(io_uring_wait_cqe_timeout(&ring, &cqe, &ts) == -ETIME, "POLL_ADD completed early");
	done = run_seq(&r, ch, 1, 3, drops);
	ts.tv_sec = 10;
	e = io_uring_wait_cqe_timeout(&ring, &cqe, &ts);
	CHECK(e == 0 && (cqe->res & POLLIN), "POLL_ADD: %d", e);
	if (e == 0)
		io_uring_cqe_seen(&ring, cqe);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	chan_verify_init(&v, 1, 0);
	CHECK_OK(aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL));
	CHECK(v.received == 3 && v.errors == 0, "%llu received", (unsigned long long)v.received);
	CHECK(aql_channel_arm(ch) == 1, "re-arming after the drain");
	chan_verify_fini(&v);
	io_uring_queue_exit(&ring);
out:
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

static int32_t mul(uint32_t opcode, const void *req, uint32_t bytes, void *reply,
		   uint32_t cap, uint32_t *reply_bytes, void *ctx)
{
	uint32_t w[2];
	uint64_t p;

	(void)ctx;
	if (opcode != CHAN_OP_MUL || bytes != sizeof(w) || cap < sizeof(p))
		return -100;
	memcpy(w, req, sizeof(w));
	p = (uint64_t)w[0] * w[1];
	memcpy(reply, &p, sizeof(p));
	*reply_bytes = sizeof(p);
	return (int32_t)w[0] - 1;
}

static aql_completion run_rpc(struct rig *r, aql_channel *ch, uint32_t n, uint32_t count,
			      uint32_t opcode, aql_buf *res)
{
	aql_launch_config cfg = { .grid = { n }, .workgroup = { 1 } };
	aql_completion done = { 0 };

	CHECK_OK(AQL_LAUNCH(r->queue, th_kernel(r->co, "chan_rpc"), &cfg, &done, AQL_ARG(ch),
			    AQL_ARG(count), AQL_ARG(opcode), AQL_ARG(res)));
	return done;
}

/* Work-items call the host; more callers than reply slots. */
static void test_rpc(void)
{
	struct rig r = rig_make(8);
	aql_channel *ch = chan(r.agent, 64, 64, 0, 4);
	aql_buf *res = i32_buf(32);
	const int32_t *out;
	aql_channel_stats s;

	CHECK_OK(aql_channel_register_rpc(ch, CHAN_OP_MUL, mul, NULL));
	CHECK_OK(aql_channel_serve_start(ch, NULL, NULL));
	CHECK(aql_channel_serve_start(ch, NULL, NULL) == AQL_ERR_BUSY, "a second serve thread");
	CHECK_DONE(aql_completion_wait(run_rpc(&r, ch, 16, 100, CHAN_OP_MUL, res), TH_TIMEOUT_NS));
	out = aql_buf_data(res, int32_t);
	for (int i = 0; i < 16; i++)
		CHECK(out[2 * i] == 0, "work-item %d: %d wrong replies (last %d)", i, out[2 * i],
		      out[2 * i + 1]);
	/* An opcode nobody serves. */
	CHECK_DONE(aql_completion_wait(run_rpc(&r, ch, 2, 3, 99, res), TH_TIMEOUT_NS));
	out = aql_buf_data(res, int32_t);
	CHECK(out[0] == 3 && out[1] == AQL_CHANNEL_CALL_UNKNOWN && out[2] == 3,
	      "unknown opcode: %d bad, last %d", out[0], out[1]);
	CHECK_OK(aql_channel_serve_stop(ch));
	s = stats(ch);
	CHECK(s.rpc_calls == 1600 + 6 && s.received == 1606, "%llu calls, %llu received",
	      (unsigned long long)s.rpc_calls, (unsigned long long)s.received);
	CHECK_OK(aql_channel_destroy(ch));

	/* No reply slots: the call fails on the device, sends nothing. */
	ch = chan(r.agent, 64, 64, 0, 0);
	CHECK_DONE(aql_completion_wait(run_rpc(&r, ch, 1, 2, CHAN_OP_MUL, res), TH_TIMEOUT_NS));
	out = aql_buf_data(res, int32_t);
	CHECK(out[0] == 2 && out[1] == AQL_CHANNEL_CALL_NO_REPLIES, "no replies: %d, %d",
	      out[0], out[1]);
	CHECK(stats(ch).sent == 0, "a request was sent");
	CHECK_OK(aql_buf_destroy(res));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* The serve thread drains while senders run, and stop drains the rest. */
static void test_serve(void)
{
	struct rig r = rig_make(4);
	aql_channel *ch = chan(r.agent, 64, 128, 0, 0);
	aql_buf *drops = u32_buf(4);
	struct chan_verify v;
	aql_status st;

	chan_verify_init(&v, 4, 0);
	CHECK_OK(aql_channel_serve_start(ch, chan_verify_msg, &v));
	CHECK_DONE(aql_completion_wait(run_seq(&r, ch, 4, 3000, drops), TH_TIMEOUT_NS));
	CHECK_OK(aql_channel_serve_stop(ch));
	CHECK(v.received == 12000 && v.errors == 0, "%llu received: %s",
	      (unsigned long long)v.received, v.first_error);
	chan_verify_fini(&v);

	/* A serve thread with no callback for kind 0 ends, and says why. */
	CHECK_OK(aql_channel_serve_start(ch, NULL, NULL));
	CHECK_DONE(aql_completion_wait(run_seq(&r, ch, 1, 1, drops), TH_TIMEOUT_NS));
	st = aql_channel_serve_stop(ch);
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has("no handler for message kind 0"),
	      "serve stop: %s: %s", aql_status_str(st), aql_error_message());
	/* The message stayed: a drain with a callback gets it. */
	chan_verify_init(&v, 1, 0);
	CHECK_OK(aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL));
	CHECK(v.received == 1, "the unhandled message was lost");
	chan_verify_fini(&v);
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* A header claiming more bytes than the ring holds stops the channel. */
static void test_malformed(void)
{
	aql_channel *ch = chan(th_agent(), 64, 16, 0, 0);
	aql_channel_dev *dev = (aql_channel_dev *)(uintptr_t)aql_channel_device_address(ch);
	uint64_t slots = 0;
	uint64_t *hdr;
	struct chan_verify v;
	aql_status st;

	/* The descriptor is agent memory: read through a copy, as on a GPU. */
	CHECK_OK(aql_agent_copy(th_agent(), &slots, &dev->slots, sizeof(slots)));
	hdr = (uint64_t *)(uintptr_t)slots;
	if (!hdr)
		exit(1);
	__atomic_store_n(hdr, AQL_CHANNEL_HDR(0, 0, 5000), __ATOMIC_RELEASE);
	chan_verify_init(&v, 1, 0);
	st = aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL);
	CHECK(st == AQL_ERR_QUEUE_ERROR && th_error_has("ticket 0") && th_error_has("5000"),
	      "malformed header: %s: %s", aql_status_str(st), aql_error_message());
	CHECK(v.received == 0, "the bad message was delivered");
	st = aql_channel_drain(ch, 0, chan_verify_msg, &v, NULL);
	CHECK(st == AQL_ERR_QUEUE_ERROR && th_error_has("stopped"), "after the stop: %s",
	      aql_status_str(st));
	chan_verify_fini(&v);
	CHECK_OK(aql_channel_destroy(ch));
}

static int count_msg(const aql_channel_msg *m, void *ctx)
{
	(void)m;
	(*(uint32_t *)ctx)++;
	return 0;
}

/*
 * Payload in a message's second slot that reads as the header the next
 * lap expects there must not be taken for a message: a 2-slot message at
 * tickets 0-1 of a 4-slot ring carries, where slot 1 starts, the header of
 * ticket 5.
 */
static void test_lookalike(void)
{
	struct rig r = rig_make(1);
	aql_channel *ch = chan(r.agent, 64, 4, 0, 0);
	aql_buf *data = NULL;
	aql_launch_config cfg = { .grid = { 1 } };
	const aql_kernel *k = th_kernel(r.co, "chan_send_buf");
	uint64_t fake = AQL_CHANNEL_HDR(5, 0, 10);
	aql_completion done;
	uint32_t n = 0;

	CHECK_OK(aql_buf_create(AQL_TYPE(uint8_t), 120, AQL_IN, NULL, &data));
	if (!data)
		exit(1);
	memset(aql_buf_data(data, uint8_t), 0x5a, 120);
	memcpy(aql_buf_data(data, uint8_t) + 64 - AQL_CHANNEL_HDR_BYTES, &fake, sizeof(fake));
	CHECK_OK(AQL_LAUNCH(r.queue, k, &cfg, &done, AQL_ARG(ch), AQL_ARG(data), AQL_ARG(120u),
			    AQL_ARG(1u)));
	CHECK_OK(AQL_LAUNCH(r.queue, k, &cfg, &done, AQL_ARG(ch), AQL_ARG(data), AQL_ARG(8u),
			    AQL_ARG(2u)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_channel_drain(ch, 0, count_msg, &n, NULL));
	CHECK(n == 3, "%u of 3 messages", n);
	CHECK_OK(AQL_LAUNCH(r.queue, k, &cfg, &done, AQL_ARG(ch), AQL_ARG(data), AQL_ARG(8u),
			    AQL_ARG(1u)));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	n = 0;
	CHECK_OK(aql_channel_drain(ch, 0, count_msg, &n, NULL));
	CHECK(n == 1, "%u messages where 1 was sent: payload read as a header", n);
	CHECK_OK(aql_buf_destroy(data));
	CHECK_OK(aql_channel_destroy(ch));
	rig_free(&r);
}

/* The launch checks channel arguments against the kernel's. */
static void test_launch_checks(void)
{
	struct rig r = rig_make(1), other = { 0 };
	aql_agent *elsewhere = th_agent();
	aql_channel *ch = chan(r.agent, 64, 16, 0, 0), *foreign;
	aql_buf *drops = u32_buf(1);
	aql_launch_config cfg = { .grid = { 1 } };
	aql_status st;

	/* Another CPU agent; for the NVIDIA agent the default CPU agent will do. */
	if (!th_test_gpu()) {
		other = rig_make(1);
		elsewhere = other.agent;
	}
	foreign = chan(elsewhere, 64, 16, 0, 0);
	st = AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_seq"), &cfg, NULL, AQL_ARG(ch), AQL_ARG(1u),
			AQL_ARG(ch));
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has("argument 2 'drops'") &&
	      th_error_has("got a channel"), "a channel for uint32_t *: %s", aql_error_message());
	st = AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_seq"), &cfg, NULL, AQL_ARG(drops), AQL_ARG(1u),
			AQL_ARG(drops));
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has("argument 0 'ch'"),
	      "a buffer for the channel: %s", aql_error_message());
	st = AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_seq"), &cfg, NULL, AQL_ARG(foreign), AQL_ARG(1u),
			AQL_ARG(drops));
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has("another agent"),
	      "another agent's channel: %s", aql_error_message());
	st = AQL_LAUNCH(r.queue, th_kernel(r.co, "chan_seq"), &cfg, NULL, AQL_ARG((aql_channel *)NULL),
			AQL_ARG(1u), AQL_ARG(drops));
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has("NULL channel"), "NULL channel: %s",
	      aql_error_message());
	CHECK(stats(ch).sent == 0, "a refused launch ran");
	CHECK_OK(aql_buf_destroy(drops));
	CHECK_OK(aql_channel_destroy(ch));
	CHECK_OK(aql_channel_destroy(foreign));
	rig_free(&r);
	if (!th_test_gpu())
		rig_free(&other);
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: test_channel CHANNEL_KERNELS.host.so [CHANNEL_KERNELS.ptx]\n");
		return 2;
	}
	co_path = th_test_gpu() ? (argc == 3 ? argv[2] : NULL) : argv[1];
	if (!co_path) {
		fprintf(stderr, "test_channel: no PTX kernels for the NVIDIA agent\n");
		return 1;
	}
	test_config_errors();
	test_order();
	test_backpressure();
	test_drop_mode();
	test_sizes();
	test_limit();
	test_group();
	test_wait();
	test_io_uring();
	test_rpc();
	test_serve();
	test_malformed();
	test_lookalike();
	test_launch_checks();
	return th_finish();
}
