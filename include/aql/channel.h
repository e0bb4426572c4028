/* SPDX-License-Identifier: MIT */
/*
 * Channels: many work-items send, one host thread receives. For logs,
 * printf (aql/printf.h), progress counters and requests the host serves
 * (RPC). The device side is in aql/kernel.h (aql/kernel_channel.h); the
 * layout both share, and why each part lives where it does, is in
 * aql/channel_abi.h.
 *
 *   aql_channel *ch;
 *   aql_channel_create(agent, NULL, &ch);
 *   AQL_LAUNCH(q, kernel, &cfg, &done, AQL_ARG(ch), ...);
 *   while (aql_completion_query(&done) ...)
 *           aql_channel_drain(ch, 0, on_message, ctx, NULL);
 *
 * Messages arrive in one order (by ticket), so each work-item's messages
 * keep their order. Nothing is lost or duplicated: a full channel makes
 * senders wait, unless it was created with AQL_CHANNEL_DROP, where sends
 * that find it full are dropped and counted in the statistics.
 *
 * The consumer: aql_channel_drain() takes what is there; aql_channel_wait()
 * sleeps until something is. A sender wakes a sleeping consumer (one
 * eventfd write) only when the consumer said it is about to sleep, so a
 * busy channel costs no syscall per message. For an event loop,
 * aql_channel_fd() is that eventfd: call aql_channel_arm() before each
 * poll (or io_uring POLL_ADD) of it. aql_channel_serve_start() runs a
 * consumer thread instead. The kernels of an NVIDIA agent, and of an AMD
 * agent (whose channels get no KFD event yet), do not interrupt the
 * host (aql_agent_info.wakes_host is 0), so nothing makes the eventfd
 * readable for their messages:
 * aql_channel_wait() (and so the serve thread) then looks every 50 us,
 * and an event loop polling the fd needs a timeout of its own.
 *
 * One consumer at a time: the drains of one channel (the serve thread's
 * included) are serialised by a lock. Several threads may wait; a wake-up
 * may then reach only one of them, and the others wake at their timeout.
 */
#ifndef AQL_CHANNEL_H
#define AQL_CHANNEL_H

#include <stddef.h>
#include <stdint.h>
#include <aql/agent.h>
#include <aql/channel_abi.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_channel aql_channel;

enum aql_channel_flag {
	/* A send that finds the channel full is dropped and counted. */
	AQL_CHANNEL_DROP = 1u << 0,
	/*
	 * CPU agent senders fence every message, and the consumer calls no
	 * membarrier() before it sleeps: for a consumer that sleeps more
	 * often than it receives. Without this flag it is used only where
	 * membarrier() is refused (a seccomp filter, a kernel before 4.14).
	 */
	AQL_CHANNEL_FENCE = 1u << 1,
};

typedef struct aql_channel_config {
	uint32_t slot_size;	/* bytes, a multiple of 64; 0: 64 */
	uint32_t slot_count;	/* a power of two, 2 .. 2^24; 0: 4096 */
	uint32_t flags;		/* enum aql_channel_flag */
	uint32_t reply_slots;	/* RPC reply slots, a power of two; 0: none */
	uint32_t reply_size;	/* bytes per reply slot, a multiple of 64,
				 * 32 of them the slot's header; 0: 128 */
} aql_channel_config;

/* One received message; valid only during the callback. */
typedef struct aql_channel_msg {
	const void *data;
	uint32_t size;
	uint32_t kind;		/* enum aql_channel_kind, or 16..255 */
	uint64_t ticket;	/* its place in the channel's one order */
} aql_channel_msg;

/* Called for each message; return nonzero to end the drain after it. */
typedef int (*aql_channel_fn)(const aql_channel_msg *msg, void *ctx);

typedef struct aql_channel_stats {
	uint64_t sent;		/* messages published: received + waiting */
	uint64_t received;	/* messages drained */
	uint64_t full_waits;	/* sends that had to wait for room */
	uint64_t drops;		/* sends dropped (AQL_CHANNEL_DROP) */
	uint64_t wakeups;	/* times a sender woke the consumer */
	uint64_t rpc_calls;	/* requests answered */
} aql_channel_stats;

/*
 * Create a channel whose senders run on agent: the ring in device-visible
 * host memory, the descriptor and its counters in agent memory. config
 * may be NULL for the defaults. The largest message is slot_count *
 * slot_size - 8 bytes (at most AQL_CHANNEL_MAX_BYTES), and needs that
 * many slots free at once.
 *
 * Errors: AQL_ERR_INVALID_ARG naming the field (a slot size that is not a
 * multiple of 64, a count that is not a power of two, unknown flags);
 * AQL_ERR_NOMEM; AQL_ERR_SYSTEM (eventfd). Thread safe.
 */
aql_status aql_channel_create(aql_agent *agent, const aql_channel_config *config,
			      aql_channel **out);

/*
 * Destroy ch: stops its serve thread. No kernel may still use it; the
 * messages not drained are discarded. NULL is accepted.
 */
aql_status aql_channel_destroy(aql_channel *ch);

/*
 * The address kernels take (aql_global aql_channel_dev *): the descriptor
 * in agent memory. AQL_ARG(ch) passes it. Thread safe.
 */
uint64_t aql_channel_device_address(const aql_channel *ch);

/*
 * Receive up to max messages (0: all that are there) without waiting:
 * each goes to the handler registered for its kind, else to fn (which
 * may be NULL when every kind has a handler; a message with neither is
 * counted and dropped with a message). *received (if not NULL) gets the
 * count. Slots are released after their callback returns.
 * Errors: AQL_ERR_INVALID_ARG; AQL_ERR_QUEUE_ERROR when a header is
 * malformed (a size past max_bytes): the channel stops there, and the
 * message names the ticket. Thread safe (serialised).
 */
aql_status aql_channel_drain(aql_channel *ch, uint32_t max, aql_channel_fn fn,
			     void *ctx, uint32_t *received);

/*
 * Wait until a message is there or timeout_ns passes (UINT64_MAX:
 * forever). Spins briefly, then sleeps on the eventfd (for an NVIDIA
 * agent, in slices of 50 us, looking after each).
 * Errors: AQL_ERR_TIMEOUT; AQL_ERR_SYSTEM. Thread safe.
 */
aql_status aql_channel_wait(aql_channel *ch, uint64_t timeout_ns);

/*
 * The eventfd that becomes readable when a sender wakes the consumer.
 * Before each poll of it, call aql_channel_arm(): 0 means a message is
 * already there (drain instead of polling); 1 means armed, and the next
 * send will make the fd readable. Reading the fd is optional; arm resets
 * it. An arm that announces a sleep runs membarrier() (microseconds; none
 * with AQL_CHANNEL_FENCE), which spares every send a fence. Thread safe.
 */
int aql_channel_fd(const aql_channel *ch);
int aql_channel_arm(aql_channel *ch);

/*
 * Route messages of kind (1..255) to fn during drains, replacing any
 * handler; fn NULL removes it. After a drain that gave fn messages, fn is
 * called once more with msg NULL: the end of the batch. aql/printf.h and aql_channel_serve_rpc()
 * use this. Errors: AQL_ERR_INVALID_ARG (kind 0). Not thread safe with
 * drains of ch.
 */
aql_status aql_channel_set_handler(aql_channel *ch, uint32_t kind, aql_channel_fn fn,
				   void *ctx);

/*
 * An RPC handler: the request is req_bytes at req; write at most
 * reply_cap bytes to reply and set *reply_bytes. The return value (0 or
 * more) is what aql_channel_call() returns on the device.
 */
typedef int32_t (*aql_channel_rpc_fn)(uint32_t opcode, const void *req,
				      uint32_t req_bytes, void *reply,
				      uint32_t reply_cap, uint32_t *reply_bytes,
				      void *ctx);

/*
 * Answer device calls of opcode with fn (NULL removes it). Requests with
 * no handler get AQL_CHANNEL_CALL_UNKNOWN. Errors: AQL_ERR_INVALID_ARG
 * (no reply slots); AQL_ERR_NOMEM. Not thread safe with drains of ch.
 */
aql_status aql_channel_register_rpc(aql_channel *ch, uint32_t opcode,
				    aql_channel_rpc_fn fn, void *ctx);

/*
 * Start a host thread that waits for messages and drains them into fn
 * (and the handlers), until aql_channel_serve_stop() or destroy, which
 * drain what is left. A drain error ends the thread early; stop then
 * returns it. Errors: AQL_ERR_BUSY (already serving); AQL_ERR_SYSTEM.
 * Thread safe.
 */
aql_status aql_channel_serve_start(aql_channel *ch, aql_channel_fn fn, void *ctx);
aql_status aql_channel_serve_stop(aql_channel *ch);

/*
 * Fill *out. It waits for a drain in progress, and walks the published
 * messages not yet drained to count them. Errors: AQL_ERR_INVALID_ARG;
 * those of aql_agent_copy() where agent memory is not host memory.
 * Thread safe.
 */
aql_status aql_channel_get_stats(aql_channel *ch, aql_channel_stats *out);

/*
 * For host kernels, bound by the loader (aql/kernel_channel.h): wake the
 * consumer of the channel whose address is channel; wait until the
 * channel whose device address is dev has room for ticket need - 1 (spin,
 * then sleep until the consumer releases slots); back off for the
 * round-th time in another wait (spin, then yield, then sleep 50 us).
 */
void aql_channel_host_wake(uint64_t channel);
void aql_channel_host_wait_room(uint64_t dev, uint64_t need);
void aql_channel_host_pause(uint32_t round);

#ifdef __cplusplus
}
#endif

#endif
