/* SPDX-License-Identifier: MIT */
/*
 * The memory layout that device producers and the host consumer of a
 * channel (aql/channel.h) share. Freestanding: it compiles as C and as
 * OpenCL C, where aql/kernel.h provides the fixed-width types.
 *
 * Where each part lives, and why:
 *
 *   aql_channel_dev   agent memory. The descriptor (read-only) and the
 *                     counters producers update with read-modify-write:
 *                     every RMW of the protocol stays in memory local to
 *                     the agent, so a GPU needs no PCIe atomics.
 *   aql_channel_ring  host memory (fine-grained). The consumer's tail and
 *                     sleep flag, then the slots, then the RPC reply
 *                     slots. Producers touch it only with atomic 64-bit
 *                     loads and stores (release/acquire, system scope)
 *                     and plain stores of payload bytes.
 *
 * A message starts at a slot with an 8-byte header (AQL_CHANNEL_HDR) and
 * its payload runs on through the following slots, wrapping at the end of
 * the ring; only the first slot has a header. Slot positions ("tickets")
 * count up forever; ticket t is slot t % slot_count.
 */
#ifndef AQL_CHANNEL_ABI_H
#define AQL_CHANNEL_ABI_H

#ifndef __OPENCL_C_VERSION__
#include <stdint.h>
#endif
#include <aql/compat.h>

#define AQL_CHANNEL_MAGIC 0x4e484341u	/* "ACHN" */
#define AQL_CHANNEL_SLOT_ALIGN 64u	/* slot sizes are multiples of this */
#define AQL_CHANNEL_HDR_BYTES 8u
#define AQL_CHANNEL_MAX_BYTES 0xffffffu	/* payload bytes of one message */
#define AQL_CHANNEL_RING_HDR_BYTES 256u	/* aql_channel_ring before the slots */
#define AQL_CHANNEL_REPLY_HDR_BYTES 32u	/* aql_channel_reply before its data */

/* Message kinds: the header's byte 3. The host dispatches on it. */
enum aql_channel_kind {
	AQL_CHANNEL_KIND_DATA = 0,	/* the application's messages */
	AQL_CHANNEL_KIND_PRINTF = 1,	/* aql/printf.h records */
	AQL_CHANNEL_KIND_RPC = 2,	/* aql_channel_call() requests */
	AQL_CHANNEL_KIND_USER = 16,	/* 16..255: the application's own */
};

/* Results of the device's send functions (aql/kernel_channel.h). */
enum aql_channel_send_result {
	AQL_CHANNEL_SENT = 0,
	AQL_CHANNEL_DROPPED = 1,	/* drop mode, and the channel was full */
	AQL_CHANNEL_TOO_BIG = 2,	/* more than the channel's max_bytes */
};

/* aql_channel_call() results below zero; handlers return zero or more. */
enum aql_channel_call_result {
	AQL_CHANNEL_CALL_UNKNOWN = -1,	/* no handler for the opcode */
	AQL_CHANNEL_CALL_NO_REPLIES = -2,	/* created without reply slots */
	AQL_CHANNEL_CALL_DROPPED = -3,	/* drop mode, and the channel was full */
	AQL_CHANNEL_CALL_TOO_BIG = -4,	/* request past max_bytes */
};

/* aql_channel_dev.flags */
enum aql_channel_dev_flag {
	AQL_CHANNEL_DEV_DROP = 1u << 0,	/* full: drop and count, never wait */
	/*
	 * CPU agent senders put a full fence between the header store and
	 * the load of sleeping. Without it they need none: the consumer,
	 * before it sleeps, makes every thread of the process execute one
	 * (membarrier), which GPU senders cannot rely on, so they always do.
	 */
	AQL_CHANNEL_DEV_FENCE = 1u << 1,
};

/*
 * The header of the message whose first ticket is pos: the low 32 bits of
 * pos + 1 (so a slot still holding the message of ticket pos - slot_count,
 * or zeroes, never reads as ready), the kind, and the payload size. The
 * consumer zeroes the first word of a message's later slots before it
 * releases them, so payload never reads as a header either.
 */
#define AQL_CHANNEL_HDR(pos, kind, bytes)                                      \
	(((uint64_t)(uint32_t)((pos) + 1) << 32) |                              \
	 ((uint64_t)((kind) & 0xffu) << 24) | ((uint64_t)(bytes) & 0xffffffu))
#define AQL_CHANNEL_HDR_SEQ(h) ((uint32_t)((h) >> 32))
#define AQL_CHANNEL_HDR_KIND(h) ((uint32_t)((h) >> 24) & 0xffu)
#define AQL_CHANNEL_HDR_BYTES_OF(h) ((uint32_t)(h) & 0xffffffu)

/* Slots a message of bytes payload bytes takes. */
#define AQL_CHANNEL_SLOTS(bytes, slot_size)                                    \
	((AQL_CHANNEL_HDR_BYTES + (uint32_t)(bytes) + (slot_size) - 1) / (slot_size))

/* Host memory, AQL_CHANNEL_RING_HDR_BYTES; the slots follow. */
typedef struct __attribute__((aligned(64))) aql_channel_ring {
	/* Tickets the consumer has released: written by it alone. */
	uint64_t tail;
	uint64_t pad0[7];
	/* 1 while the consumer sleeps or is about to. */
	uint32_t sleeping;
	/*
	 * CPU agent senders waiting for room sleep on room_seq (a futex),
	 * which the consumer bumps when it releases slots while
	 * room_waiters is not 0. GPU senders spin instead.
	 */
	uint32_t room_seq;
	uint32_t room_waiters;
	uint32_t pad1[13];
	/*
	 * How a producer wakes the sleeping consumer. CPU agent: host_wake
	 * is the libaql channel, passed to aql_channel_host_wake(). AMD GPU:
	 * event_mailbox and event_id of a KFD event, as in amd_signal_t.
	 */
	uint64_t host_wake;
	uint64_t event_mailbox;
	uint32_t event_id;
	uint32_t pad2[11];
	uint64_t pad3[8];
} aql_channel_ring;

/* Agent memory, 256 bytes. */
typedef struct __attribute__((aligned(64))) aql_channel_dev {
	/* Read-only after creation. */
	uint64_t ring;		/* aql_channel_ring, host memory */
	uint64_t slots;		/* the first slot: ring + 256 */
	uint64_t replies;	/* aql_channel_reply slots, or 0 */
	uint32_t slot_size;	/* bytes, a multiple of 64 */
	uint32_t slot_count;	/* a power of two */
	uint32_t flags;		/* enum aql_channel_dev_flag */
	uint32_t max_bytes;	/* largest payload of one message */
	uint32_t reply_size;	/* bytes per reply slot, a multiple of 64 */
	uint32_t reply_count;	/* a power of two, or 0 */
	uint32_t magic;		/* AQL_CHANNEL_MAGIC */
	uint32_t pad0[3];
	/* Producers: the next ticket. */
	uint64_t head;
	uint64_t pad1[7];
	/*
	 * The largest tail a producer has read: a producer whose ticket is
	 * within slot_count of it need not read host memory (on a GPU, a
	 * PCIe round trip) to know its slot is free.
	 */
	uint64_t tail_seen;
	uint64_t pad2[7];
	/* Rare events, and the RPC reply ticket. */
	uint64_t full_waits;
	uint64_t drops;
	uint64_t rpc_next;
	uint64_t pad3[5];
} aql_channel_dev;

/*
 * An RPC reply slot (host memory, reply_size bytes). Request r uses slot
 * r % reply_count once the requester of r - reply_count has stored
 * free = r / reply_count; the host stores done = r + 1 after the reply.
 */
typedef struct aql_channel_reply {
	uint64_t done;		/* written by the host (release) */
	uint64_t free;		/* written by the requester (release) */
	int32_t status;		/* the handler's result */
	uint32_t bytes;		/* reply bytes that follow */
	uint64_t pad;
} aql_channel_reply;

/* The payload of an AQL_CHANNEL_KIND_RPC message, before the request. */
typedef struct aql_channel_rpc_req {
	uint64_t ticket;	/* r: the reply slot is r % reply_count */
	uint32_t opcode;
	uint32_t bytes;		/* request bytes that follow */
} aql_channel_rpc_req;

#ifndef __OPENCL_C_VERSION__
AQL_STATIC_ASSERT(sizeof(aql_channel_ring) == AQL_CHANNEL_RING_HDR_BYTES, "ring header");
AQL_STATIC_ASSERT(sizeof(aql_channel_dev) == 256, "channel descriptor");
AQL_STATIC_ASSERT(sizeof(aql_channel_reply) == AQL_CHANNEL_REPLY_HDR_BYTES, "reply header");
AQL_STATIC_ASSERT(sizeof(aql_channel_rpc_req) == 16, "rpc request header");
#endif

#endif
