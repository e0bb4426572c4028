/* SPDX-License-Identifier: MIT */
/*
 * Pure tests of <aql/packet.h>: header encoding and decoding, the publish
 * store, and the packet layouts fixed by the HSA 1.2 spec and AMD's vendor
 * extension. Needs no agent, so it runs everywhere.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <aql/packet.h>

static unsigned int passed, failed;

static void expect_eq(const char *ctx, const char *got_expr, long long got,
		      const char *want_expr, long long want)
{
	if (got == want) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL: %s%s%s = %lld (0x%llx), expected %s = %lld (0x%llx)\n",
	       ctx ? ctx : "", ctx ? ": " : "", got_expr, got,
	       (unsigned long long)got, want_expr, want,
	       (unsigned long long)want);
}

/* The names in the message are the expressions as written. */
#define EXPECT_EQ(got, want) \
	expect_eq(NULL, #got, (long long)(got), #want, (long long)(want))
#define EXPECT_EQ_CTX(ctx, got, want) \
	expect_eq(ctx, #got, (long long)(got), #want, (long long)(want))

static const char *const type_name[] = {
	"VENDOR_SPECIFIC", "INVALID", "KERNEL_DISPATCH",
	"BARRIER_AND", "AGENT_DISPATCH", "BARRIER_OR",
};

/*
 * Every type x barrier x acquire x release. The expected value uses the
 * spec's bit positions written out, not our enum, so a wrong shift constant
 * cannot hide behind itself.
 */
static void check_header_roundtrip(void)
{
	enum aql_packet_type type;
	enum aql_fence_scope acq, rel;
	int barrier;
	char ctx[96];

	for (type = AQL_PACKET_VENDOR_SPECIFIC; type <= AQL_PACKET_BARRIER_OR; type++)
	for (barrier = 0; barrier <= 1; barrier++)
	for (acq = AQL_FENCE_NONE; acq <= AQL_FENCE_SYSTEM; acq++)
	for (rel = AQL_FENCE_NONE; rel <= AQL_FENCE_SYSTEM; rel++) {
		uint16_t h = aql_packet_header(type, barrier, acq, rel);
		unsigned int want = (unsigned int)type | (unsigned int)barrier << 8 |
				    (unsigned int)acq << 9 | (unsigned int)rel << 11;

		snprintf(ctx, sizeof(ctx), "%s barrier %d acquire %d release %d",
			 type_name[type], barrier, (int)acq, (int)rel);
		EXPECT_EQ_CTX(ctx, h, want);
		EXPECT_EQ_CTX(ctx, aql_header_type(h), type);
		EXPECT_EQ_CTX(ctx, aql_header_barrier(h), barrier);
		EXPECT_EQ_CTX(ctx, aql_header_acquire(h), acq);
		EXPECT_EQ_CTX(ctx, aql_header_release(h), rel);
		/* Bits 13-15 are reserved and must stay zero. */
		EXPECT_EQ_CTX(ctx, h >> 13, 0);
	}
}

/* Decoders must mask out the neighbouring fields, not just shift. */
static void check_header_decode_masks(void)
{
	uint16_t h = aql_packet_header(AQL_PACKET_BARRIER_OR, 1,
				       AQL_FENCE_AGENT, AQL_FENCE_SYSTEM) | 0xe000;

	EXPECT_EQ(aql_header_type(h), AQL_PACKET_BARRIER_OR);
	EXPECT_EQ(aql_header_barrier(h), 1);
	EXPECT_EQ(aql_header_acquire(h), AQL_FENCE_AGENT);
	EXPECT_EQ(aql_header_release(h), AQL_FENCE_SYSTEM);
	EXPECT_EQ(aql_header_type(UINT16_MAX), 0xff);
	EXPECT_EQ(aql_header_barrier(UINT16_MAX), 1);
	EXPECT_EQ(aql_header_acquire(UINT16_MAX), 3);
	EXPECT_EQ(aql_header_release(UINT16_MAX), 3);
	/* Any non-zero barrier argument means "set". */
	EXPECT_EQ(aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 42,
				    AQL_FENCE_NONE, AQL_FENCE_NONE), 0x0102);
}

/* Values that appear verbatim in AMD's docs and ROCr sources. */
static void check_known_headers(void)
{
	EXPECT_EQ(aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1,
				    AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM), 0x1502);
	EXPECT_EQ(aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 0,
				    AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM), 0x1402);
	EXPECT_EQ(aql_packet_header(AQL_PACKET_BARRIER_AND, 1,
				    AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM), 0x1503);
	EXPECT_EQ(aql_packet_header(AQL_PACKET_INVALID, 0,
				    AQL_FENCE_NONE, AQL_FENCE_NONE), 0x0001);
}

static unsigned char pattern(unsigned int i)
{
	return (unsigned char)(0xa5 ^ (i * 37));
}

/*
 * Publish is one 32-bit little-endian store of header | rest << 16: the
 * header in bytes 0-1, setup (or the vendor format) in bytes 2-3, and the
 * body, written earlier, left alone.
 */
static void check_publish_one(uint16_t header, uint16_t rest)
{
	_Alignas(64) aql_packet slot;
	uint16_t h, r;
	unsigned int i, bad = 0;
	char ctx[64];

	for (i = 0; i < sizeof(slot.bytes); i++)
		slot.bytes[i] = pattern(i);
	aql_packet_publish(&slot, header, rest);

	snprintf(ctx, sizeof(ctx), "publish(0x%04x, 0x%04x)", header, rest);
	EXPECT_EQ_CTX(ctx, slot.bytes[0], header & 0xff);
	EXPECT_EQ_CTX(ctx, slot.bytes[1], header >> 8);
	EXPECT_EQ_CTX(ctx, slot.bytes[2], rest & 0xff);
	EXPECT_EQ_CTX(ctx, slot.bytes[3], rest >> 8);
	memcpy(&h, slot.bytes, sizeof(h));
	memcpy(&r, slot.bytes + 2, sizeof(r));
	EXPECT_EQ_CTX(ctx, h, header);
	EXPECT_EQ_CTX(ctx, r, rest);
	for (i = 4; i < sizeof(slot.bytes); i++) {
		if (slot.bytes[i] == pattern(i))
			continue;
		bad++;
		printf("FAIL: %s: byte %u = 0x%02x, expected untouched 0x%02x\n",
		       ctx, i, slot.bytes[i], pattern(i));
	}
	if (bad)
		failed++;
	else
		passed++;
}

static void check_publish(void)
{
	check_publish_one(0x1502, 3);
	check_publish_one(0x1503, 0);
	check_publish_one(0xabcd, 0x1234);
	check_publish_one(0xffff, 0xffff);
	/* A vendor packet's format byte travels in the upper half. */
	check_publish_one(aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1,
					    AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM),
			  AQL_AMD_PACKET_BARRIER_VALUE);
}

static void check_vendor_header(void)
{
	aql_barrier_value_packet p;
	aql_packet u;
	const unsigned char *b = (const unsigned char *)&p;

	EXPECT_EQ(sizeof(aql_amd_vendor_header), 4);
	EXPECT_EQ(offsetof(aql_amd_vendor_header, header), 0);
	EXPECT_EQ(offsetof(aql_amd_vendor_header, format), 2);
	EXPECT_EQ(offsetof(aql_amd_vendor_header, reserved), 3);
	EXPECT_EQ(offsetof(aql_barrier_value_packet, header.format), 2);

	memset(&p, 0, sizeof(p));
	p.header.header = aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1,
					    AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	p.header.format = AQL_AMD_PACKET_BARRIER_VALUE;
	EXPECT_EQ(b[0], 0x00);
	EXPECT_EQ(b[1], 0x15);
	EXPECT_EQ(b[2], AQL_AMD_PACKET_BARRIER_VALUE);
	EXPECT_EQ(b[3], 0);

	/* Same byte through the union, as a packet processor reads it. */
	memset(&u, 0, sizeof(u));
	u.barrier_value.header.format = AQL_AMD_PACKET_BARRIER_VALUE;
	EXPECT_EQ(u.bytes[2], AQL_AMD_PACKET_BARRIER_VALUE);
}

/* Sizes and the offsets the HSA 1.2 spec fixes for every packet format. */
static void check_layouts(void)
{
	EXPECT_EQ(sizeof(aql_dispatch_packet), 64);
	EXPECT_EQ(sizeof(aql_agent_dispatch_packet), 64);
	EXPECT_EQ(sizeof(aql_barrier_packet), 64);
	EXPECT_EQ(sizeof(aql_barrier_value_packet), 64);
	EXPECT_EQ(sizeof(aql_packet), 64);
	EXPECT_EQ(sizeof(((aql_packet *)0)->bytes), 64);

	EXPECT_EQ(offsetof(aql_dispatch_packet, setup), 2);
	EXPECT_EQ(offsetof(aql_dispatch_packet, workgroup_size_x), 4);
	EXPECT_EQ(offsetof(aql_dispatch_packet, grid_size_x), 12);
	EXPECT_EQ(offsetof(aql_dispatch_packet, private_segment_size), 24);
	EXPECT_EQ(offsetof(aql_dispatch_packet, group_segment_size), 28);
	EXPECT_EQ(offsetof(aql_dispatch_packet, kernel_object), 32);
	EXPECT_EQ(offsetof(aql_dispatch_packet, kernarg_address), 40);
	EXPECT_EQ(offsetof(aql_dispatch_packet, completion_signal), 56);

	EXPECT_EQ(offsetof(aql_agent_dispatch_packet, type), 2);
	EXPECT_EQ(offsetof(aql_agent_dispatch_packet, return_address), 8);
	EXPECT_EQ(offsetof(aql_agent_dispatch_packet, arg), 16);
	EXPECT_EQ(offsetof(aql_agent_dispatch_packet, completion_signal), 56);

	EXPECT_EQ(offsetof(aql_barrier_packet, dep_signal), 8);
	EXPECT_EQ(offsetof(aql_barrier_packet, completion_signal), 56);

	EXPECT_EQ(offsetof(aql_barrier_value_packet, signal), 8);
	EXPECT_EQ(offsetof(aql_barrier_value_packet, value), 16);
	EXPECT_EQ(offsetof(aql_barrier_value_packet, mask), 24);
	EXPECT_EQ(offsetof(aql_barrier_value_packet, cond), 32);
	EXPECT_EQ(offsetof(aql_barrier_value_packet, completion_signal), 56);

	/* Grid dimensions live in setup bits 0-1. */
	EXPECT_EQ(AQL_DISPATCH_DIMS_MASK, 0x3);
}

/* Every union member starts at the slot's first byte, header included. */
static void check_union_alias(void)
{
	aql_packet u;

	EXPECT_EQ(offsetof(aql_packet, header), 0);
	EXPECT_EQ(offsetof(aql_packet, dispatch), 0);
	EXPECT_EQ(offsetof(aql_packet, agent), 0);
	EXPECT_EQ(offsetof(aql_packet, barrier), 0);
	EXPECT_EQ(offsetof(aql_packet, barrier_value), 0);
	EXPECT_EQ(offsetof(aql_packet, bytes), 0);

	memset(&u, 0, sizeof(u));
	u.header = 0x1502;
	EXPECT_EQ(u.dispatch.header, 0x1502);
	EXPECT_EQ(u.agent.header, 0x1502);
	EXPECT_EQ(u.barrier.header, 0x1502);
	EXPECT_EQ(u.barrier_value.header.header, 0x1502);
	EXPECT_EQ(u.bytes[0] | u.bytes[1] << 8, 0x1502);

	/* completion_signal is at the same place in every format. */
	u.dispatch.completion_signal = 0x1122334455667788ull;
	EXPECT_EQ(u.agent.completion_signal, 0x1122334455667788ll);
	EXPECT_EQ(u.barrier.completion_signal, 0x1122334455667788ll);
	EXPECT_EQ(u.barrier_value.completion_signal, 0x1122334455667788ll);
}

/* aql_packet_store() leaves the slot equal to the packet, byte for byte. */
static void check_store(void)
{
	_Alignas(64) aql_packet slot;
	aql_packet p;

	memset(&slot, 0xa5, sizeof(slot));
	for (unsigned i = 0; i < sizeof(p); i++)
		p.bytes[i] = (uint8_t)(i * 7 + 1);
	aql_packet_store(&slot, &p);
	EXPECT_EQ(memcmp(&slot, &p, sizeof(p)), 0);
}

int main(void)
{
	check_store();
	check_header_roundtrip();
	check_header_decode_masks();
	check_known_headers();
	check_publish();
	check_vendor_header();
	check_layouts();
	check_union_alias();

	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
