/* SPDX-License-Identifier: MIT */
/*
 * AQL packets, bit-exact with HSA 1.2 (hsa.h) and AMD's vendor extension
 * (hsa_ext_amd.h). Every packet is 64 bytes; the first 16 bits are the
 * header, and a packet becomes visible to a packet processor only when that
 * header is stored last, with release order (see aql_packet_publish()).
 */
#ifndef AQL_PACKET_H
#define AQL_PACKET_H

#include <stdint.h>
#include <aql/compat.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_packet_type {
	AQL_PACKET_VENDOR_SPECIFIC = 0,
	AQL_PACKET_INVALID = 1,
	AQL_PACKET_KERNEL_DISPATCH = 2,
	AQL_PACKET_BARRIER_AND = 3,
	AQL_PACKET_AGENT_DISPATCH = 4,
	AQL_PACKET_BARRIER_OR = 5,
};

/* Bit positions and widths of the header fields (hsa_packet_header_t). */
enum aql_packet_header_field {
	AQL_HEADER_TYPE_SHIFT = 0,
	AQL_HEADER_TYPE_WIDTH = 8,
	AQL_HEADER_BARRIER_SHIFT = 8,
	AQL_HEADER_ACQUIRE_SHIFT = 9,
	AQL_HEADER_RELEASE_SHIFT = 11,
	AQL_HEADER_SCOPE_WIDTH = 2,
};

enum aql_fence_scope {
	AQL_FENCE_NONE = 0,
	AQL_FENCE_AGENT = 1,
	AQL_FENCE_SYSTEM = 2,
};

/* Vendor packet format byte at offset 2 (hsa_amd_packet_type_t). */
enum aql_amd_packet_format {
	AQL_AMD_PACKET_BARRIER_VALUE = 2,
};

/* Conditions shared by BARRIER_VALUE packets and signal waits. */
enum aql_signal_condition {
	AQL_COND_EQ = 0,
	AQL_COND_NE = 1,
	AQL_COND_LT = 2,
	AQL_COND_GTE = 3,
};

#define AQL_DISPATCH_DIMS_MASK 0x3u	/* setup bits 0-1: grid dimensions */

typedef struct aql_dispatch_packet {
	uint16_t header;
	uint16_t setup;
	uint16_t workgroup_size_x;
	uint16_t workgroup_size_y;
	uint16_t workgroup_size_z;
	uint16_t reserved0;
	uint32_t grid_size_x;		/* in work-items, not work-groups */
	uint32_t grid_size_y;
	uint32_t grid_size_z;
	uint32_t private_segment_size;	/* bytes per work-item */
	uint32_t group_segment_size;	/* bytes per work-group, static + dynamic */
	uint64_t kernel_object;		/* address of the kernel descriptor */
	uint64_t kernarg_address;	/* 16-byte aligned */
	uint64_t reserved2;
	uint64_t completion_signal;	/* aql_signal address, or 0 */
} aql_dispatch_packet;

typedef struct aql_agent_dispatch_packet {
	uint16_t header;
	uint16_t type;			/* function id registered with the agent */
	uint32_t reserved0;
	uint64_t return_address;
	uint64_t arg[4];
	uint64_t reserved2;
	uint64_t completion_signal;
} aql_agent_dispatch_packet;

/* BARRIER_AND and BARRIER_OR share this layout. */
typedef struct aql_barrier_packet {
	uint16_t header;
	uint16_t reserved0;
	uint32_t reserved1;
	uint64_t dep_signal[5];
	uint64_t reserved2;
	uint64_t completion_signal;
} aql_barrier_packet;

typedef struct aql_amd_vendor_header {
	uint16_t header;
	uint8_t format;			/* enum aql_amd_packet_format */
	uint8_t reserved;
} aql_amd_vendor_header;

typedef struct aql_barrier_value_packet {
	aql_amd_vendor_header header;
	uint32_t reserved0;
	uint64_t signal;		/* aql_signal address */
	int64_t value;
	int64_t mask;
	uint32_t cond;			/* enum aql_signal_condition */
	uint32_t reserved1;
	uint64_t reserved2;
	uint64_t reserved3;
	uint64_t completion_signal;
} aql_barrier_value_packet;

/* Any packet, as it sits in a queue slot. */
typedef union aql_packet {
	uint16_t header;
	aql_dispatch_packet dispatch;
	aql_agent_dispatch_packet agent;
	aql_barrier_packet barrier;
	aql_barrier_value_packet barrier_value;
	uint8_t bytes[64];
} aql_packet;

AQL_STATIC_ASSERT(sizeof(aql_packet) == 64, "AQL packets are 64 bytes");

/*
 * Encode a header. barrier is 0 or 1; scopes are enum aql_fence_scope.
 * Pure function, thread safe.
 */
static inline uint16_t aql_packet_header(enum aql_packet_type type, int barrier,
					 enum aql_fence_scope acquire,
					 enum aql_fence_scope release)
{
	return (uint16_t)(((unsigned)type << AQL_HEADER_TYPE_SHIFT) |
			  ((barrier ? 1u : 0u) << AQL_HEADER_BARRIER_SHIFT) |
			  ((unsigned)acquire << AQL_HEADER_ACQUIRE_SHIFT) |
			  ((unsigned)release << AQL_HEADER_RELEASE_SHIFT));
}

static inline enum aql_packet_type aql_header_type(uint16_t header)
{
	return (enum aql_packet_type)(header & 0xffu);
}

static inline int aql_header_barrier(uint16_t header)
{
	return (header >> AQL_HEADER_BARRIER_SHIFT) & 1;
}

static inline enum aql_fence_scope aql_header_acquire(uint16_t header)
{
	return (enum aql_fence_scope)((header >> AQL_HEADER_ACQUIRE_SHIFT) & 3u);
}

static inline enum aql_fence_scope aql_header_release(uint16_t header)
{
	return (enum aql_fence_scope)((header >> AQL_HEADER_RELEASE_SHIFT) & 3u);
}

/*
 * Make a packet visible: everything but the first 4 bytes must already be
 * written. The 32-bit header|setup store is the last write and has release
 * order, so a processor that loads the header with acquire order sees the
 * whole body. Writing header and setup together lets the body writer skip
 * a separate store to bytes 2-3. Thread safe for distinct slots.
 */
static inline void aql_packet_publish(void *slot, uint16_t header, uint16_t rest)
{
	__atomic_store_n((uint32_t *)slot, (uint32_t)header | ((uint32_t)rest << 16),
			 __ATOMIC_RELEASE);
}

/*
 * Store a prepared packet into a slot the caller reserved: bytes 4..63
 * first, then bytes 0..3 (header and setup/type) with aql_packet_publish().
 * Thread safe for distinct slots.
 */
static inline void aql_packet_store(aql_packet *slot, const aql_packet *packet)
{
	uint16_t rest;

	__builtin_memcpy(slot->bytes + 4, packet->bytes + 4, sizeof(*packet) - 4);
	__builtin_memcpy(&rest, packet->bytes + 2, sizeof(rest));
	aql_packet_publish(slot, packet->header, rest);
}

#ifdef __cplusplus
}
#endif

#endif
