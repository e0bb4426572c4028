/* SPDX-License-Identifier: MIT */
/*
 * The host side of channels: creation, the consumer (drain, wait, arm),
 * the serve thread, RPC replies and the functions host kernels call to
 * wake the consumer or back off. The protocol is described in
 * aql/channel_abi.h and aql/kernel_channel.h; tests/model/channel.pml
 * checks it.
 */
#include <errno.h>
#include <stddef.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <aql/channel.h>
#include <aql/copy.h>
#include <aql/mem.h>

#include "aql/agent_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/lock.h"
#include "util/wait.h"
#include "channel/channel_impl.h"

#define DEFAULT_SLOT_SIZE 64u
#define DEFAULT_SLOT_COUNT 4096u
#define MAX_SLOT_COUNT (1u << 24)
#define DEFAULT_REPLY_SIZE 128u
/* How long a consumer sleeps between looks when no sender can wake it. */
#define POLL_NS 50000u

struct rpc_entry {
	uint32_t opcode;
	aql_channel_rpc_fn fn;
	void *ctx;
};

struct handler {
	aql_channel_fn fn;
	void *ctx;
};

struct aql_channel {
	aql_agent *agent;
	aql_channel_dev *dev;		/* agent memory */
	aql_channel_ring *ring;		/* host memory */
	size_t registered;		/* bytes of it registered with the agent */
	uint8_t *slots;
	uint8_t *replies;
	uint32_t slot_size, slot_count, max_bytes;
	uint32_t reply_size, reply_count;
	int efd;
	int membarrier;			/* arm() fences the senders' CPUs */
	int polled;			/* senders cannot wake the consumer (nvptx) */
	int unified;			/* the host may read agent memory (ch->dev) */

	aql_lock consumer;		/* one consumer at a time */
	uint64_t pos;			/* next ticket to read; atomic */
	uint64_t released;		/* the tail last stored */
	uint8_t *scratch;		/* a wrapped message, reassembled */
	int stopped;			/* a malformed header was seen */
	uint64_t received, rpc_calls, wakeups;	/* atomic */

	struct handler handlers[256];
	struct rpc_entry *rpc;
	uint32_t rpc_count;

	pthread_t server;
	int serving, stopping;		/* atomic */
	aql_channel_fn serve_fn;
	void *serve_ctx;
	aql_status serve_status;	/* why the serve thread ended */
	char serve_error[256];
	aql_lock serve_lock;
};

static int is_pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

static aql_status check_config(const aql_channel_config *c)
{
	if (c->slot_size % AQL_CHANNEL_SLOT_ALIGN)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"channel slot_size %u is not a multiple of %u bytes",
				c->slot_size, AQL_CHANNEL_SLOT_ALIGN);
	if (c->slot_size > (1u << 20))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"channel slot_size %u is above the 1 MiB limit", c->slot_size);
	if (!is_pow2(c->slot_count) || c->slot_count < 2 || c->slot_count > MAX_SLOT_COUNT)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"channel slot_count %u is not a power of two from 2 to %u",
				c->slot_count, MAX_SLOT_COUNT);
	if (c->flags & ~(uint32_t)(AQL_CHANNEL_DROP | AQL_CHANNEL_FENCE))
		return aql_fail(AQL_ERR_INVALID_ARG, "channel flags 0x%x: unknown bits 0x%x",
				c->flags, c->flags & ~(uint32_t)(AQL_CHANNEL_DROP | AQL_CHANNEL_FENCE));
	if (c->reply_slots && (!is_pow2(c->reply_slots) || c->reply_slots > MAX_SLOT_COUNT))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"channel reply_slots %u is not a power of two up to %u",
				c->reply_slots, MAX_SLOT_COUNT);
	if (c->reply_size % AQL_CHANNEL_SLOT_ALIGN || c->reply_size > (1u << 20))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"channel reply_size %u is not a multiple of %u bytes up to 1 MiB",
				c->reply_size, AQL_CHANNEL_SLOT_ALIGN);
	return AQL_OK;
}

/*
 * Register the process for MEMBARRIER_CMD_PRIVATE_EXPEDITED (once: it is
 * per process and for good); 1 if arm() may use it. Racing first calls
 * both register, which is harmless.
 */
static int membarrier_ready(void)
{
	static int state;	/* 0 not tried, 1 registered, -1 refused; atomic */
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);

	if (!s) {
		s = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)
			? -1 : 1;
		__atomic_store_n(&state, s, __ATOMIC_RELEASE);
	}
	return s > 0;
}

aql_status aql_channel_create(aql_agent *agent, const aql_channel_config *config,
			      aql_channel **out)
{
	aql_channel_config c = config ? *config : (aql_channel_config){ 0 };
	aql_channel_dev dev = { 0 };
	aql_mem_pool *pool;
	aql_channel *ch;
	size_t ring_bytes, reply_bytes;
	uint64_t max;
	aql_agent_info info;
	aql_status st;

	if (!agent || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_create: %s is NULL",
				agent ? "out" : "agent");
	*out = NULL;
	if (!c.slot_size)
		c.slot_size = DEFAULT_SLOT_SIZE;
	if (!c.slot_count)
		c.slot_count = DEFAULT_SLOT_COUNT;
	if (c.reply_slots && !c.reply_size)
		c.reply_size = DEFAULT_REPLY_SIZE;
	if ((st = check_config(&c)))
		return st;

	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return aql_fail(AQL_ERR_NOMEM, "channel: out of memory");
	ch->agent = agent;
	ch->efd = -1;
	/* Senders that cannot wake the consumer (nvptx): its waits poll. */
	agent->ops->get_info(agent, &info);
	ch->polled = !info.wakes_host;
	ch->unified = info.unified_memory;
	ch->slot_size = c.slot_size;
	ch->slot_count = c.slot_count;
	ch->reply_size = c.reply_size;
	ch->reply_count = c.reply_slots;
	max = (uint64_t)c.slot_count * c.slot_size - AQL_CHANNEL_HDR_BYTES;
	ch->max_bytes = max > AQL_CHANNEL_MAX_BYTES ? AQL_CHANNEL_MAX_BYTES : (uint32_t)max;

	ring_bytes = AQL_CHANNEL_RING_HDR_BYTES + (size_t)c.slot_count * c.slot_size;
	reply_bytes = (size_t)c.reply_slots * c.reply_size;
	if ((st = aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &pool)) ||
	    (st = aql_mem_alloc(pool, ring_bytes + reply_bytes, 64, (void **)&ch->ring)))
		goto fail;
	memset(ch->ring, 0, ring_bytes + reply_bytes);
	if ((st = aql_agent_mem_register(agent, ch->ring, ring_bytes + reply_bytes)))
		goto fail;
	ch->registered = ring_bytes + reply_bytes;
	ch->slots = (uint8_t *)ch->ring + AQL_CHANNEL_RING_HDR_BYTES;
	ch->replies = c.reply_slots ? ch->slots + (size_t)c.slot_count * c.slot_size : NULL;
	ch->scratch = malloc(ch->max_bytes);
	if (!ch->scratch) {
		st = aql_fail(AQL_ERR_NOMEM, "channel: no memory for a %u-byte message buffer",
			      ch->max_bytes);
		goto fail;
	}
	ch->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ch->efd < 0) {
		st = aql_fail(AQL_ERR_SYSTEM, "channel: eventfd: %s", strerror(errno));
		goto fail;
	}
	ch->ring->host_wake = (uint64_t)(uintptr_t)ch;

	if ((st = aql_agent_mem_alloc(agent, sizeof(dev), (void **)&ch->dev)))
		goto fail;
	dev.ring = (uint64_t)(uintptr_t)ch->ring;
	dev.slots = (uint64_t)(uintptr_t)ch->slots;
	dev.replies = (uint64_t)(uintptr_t)ch->replies;
	dev.slot_size = c.slot_size;
	dev.slot_count = c.slot_count;
	ch->membarrier = !(c.flags & AQL_CHANNEL_FENCE) && membarrier_ready();
	dev.flags = (c.flags & AQL_CHANNEL_DROP ? AQL_CHANNEL_DEV_DROP : 0) |
		    (ch->membarrier ? 0 : AQL_CHANNEL_DEV_FENCE);
	dev.max_bytes = ch->max_bytes;
	dev.reply_size = c.reply_size;
	dev.reply_count = c.reply_slots;
	dev.magic = AQL_CHANNEL_MAGIC;
	if ((st = aql_agent_copy(agent, ch->dev, &dev, sizeof(dev))))
		goto fail;
	*out = ch;
	return AQL_OK;
fail:
	aql_channel_destroy(ch);
	return st;
}

uint64_t aql_channel_device_address(const aql_channel *ch)
{
	return ch ? (uint64_t)(uintptr_t)ch->dev : 0;
}

aql_agent *aql_channel_agent(const aql_channel *ch)
{
	return ch->agent;
}

/* The slot of ticket pos; its first word is a header if a message starts there. */
static uint64_t *slot_at(const aql_channel *ch, uint64_t pos)
{
	return (uint64_t *)(ch->slots + (size_t)(pos & (ch->slot_count - 1)) * ch->slot_size);
}

static int ready(const aql_channel *ch, uint64_t pos)
{
	return AQL_CHANNEL_HDR_SEQ(__atomic_load_n(slot_at(ch, pos), __ATOMIC_ACQUIRE)) ==
	       (uint32_t)(pos + 1);
}

/*
 * A sender waiting for the tail to reach x sleeps with bit x % 32 set, so
 * that a release wakes the senders it made room for (and those 32 apart),
 * not all of them. The bits of the tails in (from, to].
 */
static uint32_t room_bits(uint64_t from, uint64_t to)
{
	uint32_t n = to - from >= 32 ? 32 : (uint32_t)(to - from);
	uint64_t bits = ((1ull << n) - 1) << ((from + 1) % 32);

	return n == 32 ? UINT32_MAX : (uint32_t)(bits | bits >> 32);
}

/*
 * Hand the slots up to pos back to the senders, and wake those asleep
 * for room. seq_cst pairs with the sender's increment of room_waiters
 * and its load of tail (aql_channel_host_wait_room): one sees the other.
 */
static void release(aql_channel *ch, uint64_t pos)
{
	if (pos != ch->released) {
		__atomic_store_n(&ch->ring->tail, pos, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&ch->ring->room_waiters, __ATOMIC_SEQ_CST)) {
			__atomic_fetch_add(&ch->ring->room_seq, 1, __ATOMIC_RELEASE);
			aql_futex_wake_bits(&ch->ring->room_seq, room_bits(ch->released, pos));
		}
		ch->released = pos;
	}
}

static void reply(aql_channel *ch, uint64_t ticket, int32_t status, uint32_t bytes)
{
	aql_channel_reply *r = (aql_channel_reply *)(ch->replies +
		(size_t)(ticket & (ch->reply_count - 1)) * ch->reply_size);

	r->status = status;
	r->bytes = bytes;
	/* Release: the reply's bytes are there before done says so. */
	__atomic_store_n(&r->done, ticket + 1, __ATOMIC_RELEASE);
	__atomic_fetch_add(&ch->rpc_calls, 1, __ATOMIC_RELAXED);
}

/* The AQL_CHANNEL_KIND_RPC handler: run the opcode's function, reply. */
static int serve_rpc(const aql_channel_msg *m, void *arg)
{
	aql_channel *ch = arg;
	aql_channel_rpc_req req;
	uint32_t cap = ch->reply_size - AQL_CHANNEL_REPLY_HDR_BYTES, bytes = 0;
	uint8_t *out;
	int32_t status = AQL_CHANNEL_CALL_UNKNOWN;

	if (!m)
		return 0;
	if (m->size < sizeof(req))
		return 0;	/* no ticket to answer: dropped, see the error */
	memcpy(&req, m->data, sizeof(req));
	out = ch->replies + (size_t)(req.ticket & (ch->reply_count - 1)) * ch->reply_size +
	      AQL_CHANNEL_REPLY_HDR_BYTES;
	if (req.bytes != m->size - sizeof(req)) {
		aql_fail(AQL_ERR_INVALID_ARG,
			 "channel RPC ticket %llu: request says %u bytes, message has %zu",
			 (unsigned long long)req.ticket, req.bytes, m->size - sizeof(req));
	} else {
		for (uint32_t i = 0; i < ch->rpc_count; i++)
			if (ch->rpc[i].opcode == req.opcode) {
				status = ch->rpc[i].fn(req.opcode, (const uint8_t *)m->data + sizeof(req),
						       req.bytes, out, cap, &bytes, ch->rpc[i].ctx);
				break;
			}
	}
	reply(ch, req.ticket, status, bytes > cap ? cap : bytes);
	return 0;
}

/* Slots of a message of bytes payload bytes: mostly one, no division. */
static uint32_t slots_of(const aql_channel *ch, uint32_t bytes)
{
	return bytes + AQL_CHANNEL_HDR_BYTES <= ch->slot_size ? 1u
	       : AQL_CHANNEL_SLOTS(bytes, ch->slot_size);
}

aql_status aql_channel_drain(aql_channel *ch, uint32_t max, aql_channel_fn fn,
			     void *ctx, uint32_t *received)
{
	uint32_t n = 0, batch;
	size_t end;
	aql_status st = AQL_OK;
	uint64_t pos, called[4];

	if (received)
		*received = 0;
	if (!ch)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_drain: channel is NULL");
	aql_lock_take(&ch->consumer);
	if (ch->stopped) {
		aql_lock_release(&ch->consumer);
		return aql_fail(AQL_ERR_QUEUE_ERROR,
				"channel stopped at ticket %llu on a malformed header",
				(unsigned long long)ch->pos);
	}
	memset(called, 0, sizeof(called));
	end = (size_t)ch->slot_count * ch->slot_size;
	batch = ch->slot_count / 4 ? ch->slot_count / 4 : 1;
	pos = ch->pos;
	while (!max || n < max) {
		uint64_t *slot = slot_at(ch, pos);
		/* Acquire: the payload the header vouches for is visible. */
		uint64_t hdr = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		uint32_t bytes = AQL_CHANNEL_HDR_BYTES_OF(hdr), k;
		uint32_t kind = AQL_CHANNEL_HDR_KIND(hdr);
		size_t off = (size_t)((uint8_t *)slot - ch->slots) + AQL_CHANNEL_HDR_BYTES;
		const struct handler *h = &ch->handlers[kind];
		aql_channel_msg m = { ch->slots + off, bytes, kind, pos };
		int stop;

		if (AQL_CHANNEL_HDR_SEQ(hdr) != (uint32_t)(pos + 1))
			break;
		if (bytes > ch->max_bytes) {
			ch->stopped = 1;
			st = aql_fail(AQL_ERR_QUEUE_ERROR,
				      "channel ticket %llu: header says %u payload bytes, the channel holds at most %u; the channel is stopped",
				      (unsigned long long)pos, bytes, ch->max_bytes);
			break;
		}
		if (!h->fn && !fn) {
			st = aql_fail(AQL_ERR_INVALID_ARG,
				      "channel ticket %llu: no handler for message kind %u and no callback given; the message stays",
				      (unsigned long long)pos, kind);
			break;
		}
		if (off + bytes > end) {
			memcpy(ch->scratch, ch->slots + off, end - off);
			memcpy(ch->scratch + (end - off), ch->slots, bytes - (end - off));
			m.data = ch->scratch;
		}
		if (h->fn)
			called[kind >> 6] |= 1ull << (kind & 63);
		stop = h->fn ? h->fn(&m, h->ctx) : fn(&m, ctx);
		/*
		 * The payload in a message's later slots could read as the
		 * header of the ticket that takes such a slot next: zero
		 * their first words before the slots go back (the release of
		 * tail orders these stores before any reuse).
		 */
		k = slots_of(ch, bytes);
		for (uint32_t j = 1; j < k; j++)
			__atomic_store_n(slot_at(ch, pos + j), 0, __ATOMIC_RELAXED);
		pos += k;
		n++;
		__atomic_store_n(&ch->pos, pos, __ATOMIC_RELAXED);
		if (pos - ch->released >= batch)
			release(ch, pos);
		if (stop)
			break;
	}
	release(ch, pos);
	/* The end of the batch, for handlers that gather (aql/printf.h). */
	for (uint32_t k = 1; k < 256; k++)
		if ((called[k >> 6] >> (k & 63) & 1) && ch->handlers[k].fn)
			ch->handlers[k].fn(NULL, ch->handlers[k].ctx);
	__atomic_fetch_add(&ch->received, n, __ATOMIC_RELAXED);
	aql_lock_release(&ch->consumer);
	if (received)
		*received = n;
	return st;
}

static void reset_eventfd(aql_channel *ch)
{
	uint64_t v;

	while (read(ch->efd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		;
}

/*
 * Announce a sleep: 1 if the consumer may now block on the eventfd, 0 if
 * a message is there. Dekker with the sender (aql_channel_put_ in
 * aql/kernel_channel.h), which stores a header, then loads sleeping:
 * either it sees sleeping = 1 and wakes us, or the re-check here sees
 * its header. Each side needs a full fence between its store and its
 * load. Ours is the seq_cst exchange. The sender's is, on a GPU or with
 * AQL_CHANNEL_DEV_FENCE, its own fence; else it is membarrier() here,
 * which runs a full fence on every CPU that runs a thread of this
 * process (a thread not running passed one when it was switched out): a
 * CPU sender's load of sleeping comes after that fence and sees 1, or
 * its header store came before it and the load below sees it. This
 * costs the consumer a few microseconds per sleep, and each sender
 * nothing per message.
 */
static int arm(aql_channel *ch)
{
	uint64_t pos = __atomic_load_n(&ch->pos, __ATOMIC_RELAXED);

	/* A message already there: no announcement, no wake-up to cause. */
	if (ready(ch, pos))
		return 0;
	reset_eventfd(ch);
	__atomic_exchange_n(&ch->ring->sleeping, 1, __ATOMIC_SEQ_CST);
	/* It cannot fail once registered; were it to, not sleeping is safe. */
	if ((ch->membarrier &&
	     syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0)) ||
	    AQL_CHANNEL_HDR_SEQ(__atomic_load_n(slot_at(ch, pos), __ATOMIC_SEQ_CST)) ==
		    (uint32_t)(pos + 1) ||
	    __atomic_load_n(&ch->stopping, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&ch->ring->sleeping, 0, __ATOMIC_RELAXED);
		return 0;
	}
	return 1;
}

int aql_channel_arm(aql_channel *ch)
{
	return ch ? arm(ch) : 0;
}

int aql_channel_fd(const aql_channel *ch)
{
	return ch ? ch->efd : -1;
}

aql_status aql_channel_wait(aql_channel *ch, uint64_t timeout_ns)
{
	uint64_t start = aql_now_ns(), now, left;
	struct timespec ts;
	struct pollfd pfd;
	int r;

	if (!ch)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_wait: channel is NULL");
	pfd.fd = ch->efd;
	pfd.events = POLLIN;
	for (;;) {
		now = aql_now_ns();
		if (ready(ch, __atomic_load_n(&ch->pos, __ATOMIC_RELAXED)) ||
		    __atomic_load_n(&ch->stopping, __ATOMIC_ACQUIRE))
			return AQL_OK;
		if (now - start < AQL_WAIT_SPIN_NS && now - start < timeout_ns) {
			sched_yield();
			continue;
		}
		if (now - start >= timeout_ns)
			return aql_fail(AQL_ERR_TIMEOUT, "channel: no message within %llu ns",
					(unsigned long long)timeout_ns);
		if (!arm(ch))
			return AQL_OK;
		left = timeout_ns - (now - start);
		if (ch->polled && left > POLL_NS)
			left = POLL_NS;
		ts.tv_sec = (time_t)(left / 1000000000u);
		ts.tv_nsec = (long)(left % 1000000000u);
		r = ppoll(&pfd, 1, timeout_ns == UINT64_MAX && !ch->polled ? NULL : &ts, NULL);
		__atomic_store_n(&ch->ring->sleeping, 0, __ATOMIC_RELAXED);
		if (r < 0 && errno != EINTR)
			return aql_fail(AQL_ERR_SYSTEM, "channel: ppoll: %s", strerror(errno));
	}
}

aql_status aql_channel_set_handler(aql_channel *ch, uint32_t kind, aql_channel_fn fn,
				   void *ctx)
{
	if (!ch || kind == AQL_CHANNEL_KIND_DATA || kind > 255)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_channel_set_handler: %s", !ch ? "channel is NULL"
				: "kind must be 1..255 (kind 0 goes to the drain's callback)");
	ch->handlers[kind].fn = fn;
	ch->handlers[kind].ctx = fn ? ctx : NULL;
	return AQL_OK;
}

aql_status aql_channel_register_rpc(aql_channel *ch, uint32_t opcode,
				    aql_channel_rpc_fn fn, void *ctx)
{
	struct rpc_entry *e;
	uint32_t i;

	if (!ch || !ch->reply_count)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_register_rpc: %s",
				!ch ? "channel is NULL"
				: "the channel was created without reply slots (reply_slots 0)");
	for (i = 0; i < ch->rpc_count && ch->rpc[i].opcode != opcode; i++)
		;
	if (i == ch->rpc_count) {
		if (!fn)
			return AQL_OK;
		e = realloc(ch->rpc, (i + 1) * sizeof(*e));
		if (!e)
			return aql_fail(AQL_ERR_NOMEM, "channel: no memory for RPC opcode %u", opcode);
		ch->rpc = e;
		ch->rpc_count++;
	} else if (!fn) {
		ch->rpc[i] = ch->rpc[--ch->rpc_count];
		return AQL_OK;
	}
	ch->rpc[i] = (struct rpc_entry){ opcode, fn, ctx };
	ch->handlers[AQL_CHANNEL_KIND_RPC] = (struct handler){ serve_rpc, ch };
	return AQL_OK;
}

static void *serve_main(void *arg)
{
	aql_channel *ch = arg;

	/* A failed drain (no handler for a kind, a malformed header) ends
	 * the thread; aql_channel_serve_stop() reports it. */
	while (!__atomic_load_n(&ch->stopping, __ATOMIC_ACQUIRE)) {
		ch->serve_status = aql_channel_wait(ch, UINT64_MAX);
		if (!ch->serve_status)
			ch->serve_status = aql_channel_drain(ch, 0, ch->serve_fn,
							     ch->serve_ctx, NULL);
		if (ch->serve_status) {
			snprintf(ch->serve_error, sizeof(ch->serve_error), "%s",
				 aql_error_message());
			break;
		}
	}
	return NULL;
}

aql_status aql_channel_serve_start(aql_channel *ch, aql_channel_fn fn, void *ctx)
{
	int e;

	if (!ch)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_serve_start: channel is NULL");
	aql_lock_take(&ch->serve_lock);
	if (ch->serving) {
		aql_lock_release(&ch->serve_lock);
		return aql_fail(AQL_ERR_BUSY, "channel: a serve thread already runs");
	}
	ch->serve_fn = fn;
	ch->serve_ctx = ctx;
	__atomic_store_n(&ch->stopping, 0, __ATOMIC_RELEASE);
	e = pthread_create(&ch->server, NULL, serve_main, ch);
	if (e) {
		aql_lock_release(&ch->serve_lock);
		return aql_fail(AQL_ERR_SYSTEM, "channel: pthread_create: %s", strerror(e));
	}
	ch->serving = 1;
	aql_lock_release(&ch->serve_lock);
	return AQL_OK;
}

aql_status aql_channel_serve_stop(aql_channel *ch)
{
	uint64_t one = 1;
	aql_status st = AQL_OK;

	if (!ch)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_serve_stop: channel is NULL");
	aql_lock_take(&ch->serve_lock);
	if (ch->serving) {
		__atomic_store_n(&ch->stopping, 1, __ATOMIC_RELEASE);
		if (write(ch->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			st = aql_fail(AQL_ERR_SYSTEM, "channel: eventfd write: %s", strerror(errno));
		pthread_join(ch->server, NULL);
		ch->serving = 0;
		__atomic_store_n(&ch->stopping, 0, __ATOMIC_RELEASE);
		if (ch->serve_status)
			st = aql_fail(ch->serve_status, "channel serve thread ended: %s",
				      ch->serve_error);
		else
			st = aql_channel_drain(ch, 0, ch->serve_fn, ch->serve_ctx, NULL);
	}
	aql_lock_release(&ch->serve_lock);
	return st;
}

aql_status aql_channel_get_stats(aql_channel *ch, aql_channel_stats *out)
{
	if (!ch || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_channel_get_stats: %s is NULL",
				ch ? "out" : "channel");
	/*
	 * Sent: received, plus the published messages not yet drained. No
	 * counter on the send path: it would cost every send an atomic.
	 */
	aql_lock_take(&ch->consumer);
	out->sent = __atomic_load_n(&ch->received, __ATOMIC_RELAXED);
	for (uint64_t pos = ch->pos; !ch->stopped && ready(ch, pos) && pos - ch->pos < ch->slot_count;
	     out->sent++)
		pos += AQL_CHANNEL_SLOTS(AQL_CHANNEL_HDR_BYTES_OF(*slot_at(ch, pos)), ch->slot_size);
	aql_lock_release(&ch->consumer);
	/* The senders' counters are in agent memory: read in place where it
	 * is host memory, else copied out (a GPU's memory is not the host's). */
	if (ch->unified) {
		out->full_waits = __atomic_load_n(&ch->dev->full_waits, __ATOMIC_RELAXED);
		out->drops = __atomic_load_n(&ch->dev->drops, __ATOMIC_RELAXED);
	} else {
		uint64_t c[2];
		aql_status st;

		_Static_assert(offsetof(aql_channel_dev, drops) ==
			       offsetof(aql_channel_dev, full_waits) + sizeof(uint64_t),
			       "full_waits and drops are adjacent");
		st = aql_agent_copy(ch->agent, c, &ch->dev->full_waits, sizeof(c));
		if (st != AQL_OK)
			return st;
		out->full_waits = c[0];
		out->drops = c[1];
	}
	out->received = __atomic_load_n(&ch->received, __ATOMIC_RELAXED);
	out->wakeups = __atomic_load_n(&ch->wakeups, __ATOMIC_RELAXED);
	out->rpc_calls = __atomic_load_n(&ch->rpc_calls, __ATOMIC_RELAXED);
	return AQL_OK;
}

aql_status aql_channel_destroy(aql_channel *ch)
{
	aql_status st = AQL_OK;

	if (!ch)
		return AQL_OK;
	if (ch->serving)
		st = aql_channel_serve_stop(ch);
	if (ch->dev)
		aql_agent_mem_free(ch->agent, ch->dev);
	aql_agent_mem_unregister(ch->agent, ch->ring, ch->registered);
	aql_mem_free(ch->ring);
	if (ch->efd >= 0)
		close(ch->efd);
	free(ch->scratch);
	free(ch->rpc);
	free(ch);
	return st;
}

void aql_channel_host_wake(uint64_t channel)
{
	aql_channel *ch = (aql_channel *)(uintptr_t)channel;
	uint64_t one = 1;

	__atomic_fetch_add(&ch->wakeups, 1, __ATOMIC_RELAXED);
	/* EAGAIN: the counter is saturated, so the consumer is woken anyway. */
	if (write(ch->efd, &one, sizeof(one)) < 0)
		return;
}

void aql_channel_host_wait_room(uint64_t dev, uint64_t need)
{
	const aql_channel_dev *d = (const aql_channel_dev *)(uintptr_t)dev;
	aql_channel_ring *ring = (aql_channel_ring *)(uintptr_t)d->ring;
	uint32_t seq;

	for (uint32_t round = 0;; round++) {
		if (need <= __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE) + d->slot_count)
			return;
		/* Briefly spin, then sleep: yielding senders would starve the
		 * consumer when they outnumber the cores. */
		if (round < 8) {
			aql_channel_host_pause(round);
			continue;
		}
		seq = __atomic_load_n(&ring->room_seq, __ATOMIC_ACQUIRE);
		__atomic_fetch_add(&ring->room_waiters, 1, __ATOMIC_SEQ_CST);
		/* The 1 ms deadline only bounds a wait the code cannot lose. */
		if (need > __atomic_load_n(&ring->tail, __ATOMIC_SEQ_CST) + d->slot_count)
			aql_futex_wait_bits(&ring->room_seq, seq,
					    1u << ((need - d->slot_count) % 32),
					    aql_deadline(1000000));
		__atomic_fetch_sub(&ring->room_waiters, 1, __ATOMIC_RELAXED);
	}
}

void aql_channel_host_pause(uint32_t round)
{
	if (round < 16) {
		for (uint32_t i = 0; i < (1u << (round / 2)); i++)
			aql_cpu_relax();
	} else if (round < 256) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 50000 };

		nanosleep(&ts, NULL);
	}
}
