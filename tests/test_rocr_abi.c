/* SPDX-License-Identifier: MIT */
/*
 * Our packet, queue and signal layouts must equal ROCr's bit for bit: a GPU
 * command processor (and any tool built against ROCr) reads the same memory.
 * Checked against the ROCr headers at build time when they are installed
 * (libhsa-runtime-dev); skipped otherwise.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <aql/packet.h>
#include <aql/signal.h>
#include <aql/queue.h>

#ifndef AQL_HAVE_ROCR_HEADERS

int main(void)
{
	printf("skipped: ROCr headers (libhsa-runtime-dev) not available\n");
	return 77;
}

#else

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/amd_hsa_queue.h>
#include <hsa/amd_hsa_signal.h>

static unsigned int passed, failed;

static void expect_eq(const char *ours, long long a, const char *theirs,
		      long long b)
{
	if (a == b) {
		passed++;
		return;
	}
	failed++;
	if (theirs)
		printf("FAIL: %s = %lld, ROCr %s = %lld\n", ours, a, theirs, b);
	else
		printf("FAIL: %s = %lld, expected %lld\n", ours, a, b);
}

/* The names in the message are the expressions as written. */
#define EXPECT_EQ(ours, theirs) \
	expect_eq(#ours, (long long)(ours), #theirs, (long long)(theirs))

/* For values fixed by the ABI documents rather than by a ROCr name. */
#define EXPECT_CONST(ours, value) \
	expect_eq(#ours, (long long)(ours), NULL, (long long)(value))

#define FIELD_SIZE(T, f) sizeof(((T *)0)->f)

/* Integer field signedness: the LT/GTE conditions depend on it. */
#define FIELD_SIGNED(T, f) \
	((__typeof__(((T *)0)->f))-1 < (__typeof__(((T *)0)->f))1)

/* A field both structs have: same offset, same size. */
#define EXPECT_FIELD(OT, of, RT, rf)                                          \
	do {                                                                  \
		EXPECT_EQ(offsetof(OT, of), offsetof(RT, rf));                \
		EXPECT_EQ(FIELD_SIZE(OT, of), FIELD_SIZE(RT, rf));            \
	} while (0)

#define EXPECT_LAYOUT(OT, RT)                                                 \
	do {                                                                  \
		EXPECT_EQ(sizeof(OT), sizeof(RT));                            \
		EXPECT_EQ(_Alignof(OT), _Alignof(RT));                        \
	} while (0)

static void check_dispatch_packet(void)
{
	EXPECT_LAYOUT(aql_dispatch_packet, hsa_kernel_dispatch_packet_t);
#define F(f) EXPECT_FIELD(aql_dispatch_packet, f, hsa_kernel_dispatch_packet_t, f)
	F(header);
	F(setup);
	F(workgroup_size_x);
	F(workgroup_size_y);
	F(workgroup_size_z);
	F(reserved0);
	F(grid_size_x);
	F(grid_size_y);
	F(grid_size_z);
	F(private_segment_size);
	F(group_segment_size);
	F(kernel_object);
	F(kernarg_address);
	F(reserved2);
	F(completion_signal);
#undef F
}

static void check_agent_packet(void)
{
	EXPECT_LAYOUT(aql_agent_dispatch_packet, hsa_agent_dispatch_packet_t);
#define F(f) EXPECT_FIELD(aql_agent_dispatch_packet, f, hsa_agent_dispatch_packet_t, f)
	F(header);
	F(type);
	F(reserved0);
	F(return_address);
	F(arg);
	F(reserved2);
	F(completion_signal);
#undef F
}

/* One struct of ours serves both barrier kinds. */
static void check_barrier_packets(void)
{
	EXPECT_LAYOUT(aql_barrier_packet, hsa_barrier_and_packet_t);
	EXPECT_LAYOUT(aql_barrier_packet, hsa_barrier_or_packet_t);
#define F(f)                                                                   \
	do {                                                                   \
		EXPECT_FIELD(aql_barrier_packet, f, hsa_barrier_and_packet_t, f); \
		EXPECT_FIELD(aql_barrier_packet, f, hsa_barrier_or_packet_t, f); \
	} while (0)
	F(header);
	F(reserved0);
	F(reserved1);
	F(dep_signal);
	F(reserved2);
	F(completion_signal);
#undef F
}

static void check_barrier_value_packet(void)
{
	hsa_amd_barrier_value_packet_t rocr;
	aql_barrier_value_packet ours;

	EXPECT_LAYOUT(aql_amd_vendor_header, hsa_amd_vendor_packet_header_t);
	EXPECT_FIELD(aql_amd_vendor_header, header, hsa_amd_vendor_packet_header_t, header);
	EXPECT_FIELD(aql_amd_vendor_header, format, hsa_amd_vendor_packet_header_t, AmdFormat);
	EXPECT_FIELD(aql_amd_vendor_header, reserved, hsa_amd_vendor_packet_header_t, reserved);

	EXPECT_LAYOUT(aql_barrier_value_packet, hsa_amd_barrier_value_packet_t);
#define F(f) EXPECT_FIELD(aql_barrier_value_packet, f, hsa_amd_barrier_value_packet_t, f)
	F(header);
	F(header.header);
	F(reserved0);
	F(signal);
	F(value);
	F(mask);
	F(cond);
	F(reserved1);
	F(reserved2);
	F(reserved3);
	F(completion_signal);
#undef F
	EXPECT_EQ(offsetof(aql_barrier_value_packet, header.format),
		  offsetof(hsa_amd_barrier_value_packet_t, header.AmdFormat));
	EXPECT_CONST(offsetof(aql_barrier_value_packet, header.format), 2);
	EXPECT_EQ(FIELD_SIGNED(aql_barrier_value_packet, value),
		  FIELD_SIGNED(hsa_amd_barrier_value_packet_t, value));
	EXPECT_EQ(FIELD_SIGNED(aql_barrier_value_packet, mask),
		  FIELD_SIGNED(hsa_amd_barrier_value_packet_t, mask));

	/* A packet built through ROCr's names reads back through ours. */
	memset(&rocr, 0, sizeof(rocr));
	rocr.header.AmdFormat = HSA_AMD_PACKET_TYPE_BARRIER_VALUE;
	rocr.cond = HSA_SIGNAL_CONDITION_GTE;
	rocr.value = -2;
	memcpy(&ours, &rocr, sizeof(ours));
	EXPECT_EQ(ours.header.format, rocr.header.AmdFormat);
	EXPECT_EQ(ours.cond, rocr.cond);
	EXPECT_EQ(ours.value, rocr.value);
}

static void check_hsa_queue(void)
{
	EXPECT_LAYOUT(aql_hsa_queue, hsa_queue_t);
#define F(f) EXPECT_FIELD(aql_hsa_queue, f, hsa_queue_t, f)
	F(type);
	F(features);
	F(base_address);
	F(doorbell_signal);
	F(size);
	F(reserved1);
	F(id);
#undef F
}

static void check_amd_queue(void)
{
	EXPECT_LAYOUT(aql_amd_queue, amd_queue_t);
	EXPECT_EQ(_Alignof(aql_amd_queue), AMD_QUEUE_ALIGN_BYTES);
#define F(f) EXPECT_FIELD(aql_amd_queue, f, amd_queue_t, f)
	EXPECT_FIELD(aql_amd_queue, hsa, amd_queue_t, hsa_queue);
	F(write_dispatch_id);
	F(group_segment_aperture_base_hi);
	F(private_segment_aperture_base_hi);
	F(max_cu_id);
	F(max_wave_id);
	F(max_legacy_doorbell_dispatch_id_plus_1);
	F(legacy_doorbell_lock);
	F(reserved2);
	F(read_dispatch_id);
	F(read_dispatch_id_field_base_byte_offset);
	F(compute_tmpring_size);
	F(scratch_resource_descriptor);
	F(scratch_backing_memory_location);
	F(scratch_backing_memory_byte_size);
	F(scratch_wave64_lane_byte_size);
	F(queue_properties);
	F(queue_inactive_signal);
	F(reserved4);
#undef F
	/* The offsets the command processor hard-codes. */
	EXPECT_CONST(offsetof(aql_amd_queue, write_dispatch_id), 56);
	EXPECT_CONST(offsetof(aql_amd_queue, read_dispatch_id), 128);

	/* ROCr 5.2 names these spans reserved; ours use them. Same bytes. */
	EXPECT_EQ(offsetof(aql_amd_queue, caps), offsetof(amd_queue_t, reserved1));
	EXPECT_EQ(FIELD_SIZE(aql_amd_queue, caps) + FIELD_SIZE(aql_amd_queue, reserved1),
		  FIELD_SIZE(amd_queue_t, reserved1));
	EXPECT_EQ(offsetof(aql_amd_queue, scratch_last_used_index),
		  offsetof(amd_queue_t, reserved3));
	EXPECT_EQ(FIELD_SIZE(aql_amd_queue, scratch_last_used_index),
		  FIELD_SIZE(amd_queue_t, reserved3));
}

static void check_signal(void)
{
	EXPECT_LAYOUT(aql_signal, amd_signal_t);
	EXPECT_EQ(_Alignof(aql_signal), AMD_SIGNAL_ALIGN_BYTES);
#define F(f) EXPECT_FIELD(aql_signal, f, amd_signal_t, f)
	F(kind);
	F(value);
	F(hardware_doorbell_ptr);
	F(event_mailbox_ptr);
	F(event_id);
	EXPECT_EQ(offsetof(aql_signal, sleeping), offsetof(amd_signal_t, reserved1));
	F(start_ts);
	F(end_ts);
	F(queue_ptr);
#undef F
	EXPECT_EQ(FIELD_SIGNED(aql_signal, kind), FIELD_SIGNED(amd_signal_t, kind));
	EXPECT_EQ(FIELD_SIGNED(aql_signal, value), FIELD_SIGNED(amd_signal_t, value));

	/* Our futex words live in amd_signal_t's reserved3[2]. */
	EXPECT_EQ(offsetof(aql_signal, wake_seq), offsetof(amd_signal_t, reserved3));
	EXPECT_EQ(FIELD_SIZE(aql_signal, wake_seq), FIELD_SIZE(amd_signal_t, reserved3[0]));
	EXPECT_EQ(offsetof(aql_signal, waiters),
		  offsetof(amd_signal_t, reserved3) + sizeof(uint32_t));
	EXPECT_EQ(FIELD_SIZE(aql_signal, waiters), FIELD_SIZE(amd_signal_t, reserved3[1]));
}

static void check_constants(void)
{
	EXPECT_EQ(AQL_PACKET_VENDOR_SPECIFIC, HSA_PACKET_TYPE_VENDOR_SPECIFIC);
	EXPECT_EQ(AQL_PACKET_INVALID, HSA_PACKET_TYPE_INVALID);
	EXPECT_EQ(AQL_PACKET_KERNEL_DISPATCH, HSA_PACKET_TYPE_KERNEL_DISPATCH);
	EXPECT_EQ(AQL_PACKET_BARRIER_AND, HSA_PACKET_TYPE_BARRIER_AND);
	EXPECT_EQ(AQL_PACKET_AGENT_DISPATCH, HSA_PACKET_TYPE_AGENT_DISPATCH);
	EXPECT_EQ(AQL_PACKET_BARRIER_OR, HSA_PACKET_TYPE_BARRIER_OR);

	EXPECT_EQ(AQL_HEADER_TYPE_SHIFT, HSA_PACKET_HEADER_TYPE);
	EXPECT_EQ(AQL_HEADER_BARRIER_SHIFT, HSA_PACKET_HEADER_BARRIER);
	EXPECT_EQ(AQL_HEADER_ACQUIRE_SHIFT, HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE);
	EXPECT_EQ(AQL_HEADER_RELEASE_SHIFT, HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
	EXPECT_EQ(AQL_HEADER_TYPE_WIDTH, HSA_PACKET_HEADER_WIDTH_TYPE);
	EXPECT_EQ(AQL_HEADER_SCOPE_WIDTH, HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE);
	EXPECT_EQ(AQL_HEADER_SCOPE_WIDTH, HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE);
	/* Our decoders' masks must be exactly ROCr's field widths. */
	EXPECT_EQ(aql_header_type(UINT16_MAX), (1 << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
	EXPECT_EQ(aql_header_barrier(UINT16_MAX), (1 << HSA_PACKET_HEADER_WIDTH_BARRIER) - 1);
	EXPECT_EQ(aql_header_acquire(UINT16_MAX),
		  (1 << HSA_PACKET_HEADER_WIDTH_SCACQUIRE_FENCE_SCOPE) - 1);
	EXPECT_EQ(aql_header_release(UINT16_MAX),
		  (1 << HSA_PACKET_HEADER_WIDTH_SCRELEASE_FENCE_SCOPE) - 1);

	EXPECT_EQ(AQL_FENCE_NONE, HSA_FENCE_SCOPE_NONE);
	EXPECT_EQ(AQL_FENCE_AGENT, HSA_FENCE_SCOPE_AGENT);
	EXPECT_EQ(AQL_FENCE_SYSTEM, HSA_FENCE_SCOPE_SYSTEM);

	EXPECT_EQ(AQL_COND_EQ, HSA_SIGNAL_CONDITION_EQ);
	EXPECT_EQ(AQL_COND_NE, HSA_SIGNAL_CONDITION_NE);
	EXPECT_EQ(AQL_COND_LT, HSA_SIGNAL_CONDITION_LT);
	EXPECT_EQ(AQL_COND_GTE, HSA_SIGNAL_CONDITION_GTE);

	EXPECT_EQ(AQL_AMD_PACKET_BARRIER_VALUE, HSA_AMD_PACKET_TYPE_BARRIER_VALUE);

	EXPECT_EQ(AQL_AMD_QUEUE_PROPERTY_IS_PTR64, AMD_QUEUE_PROPERTIES_IS_PTR64);
	EXPECT_EQ(AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING,
		  AMD_QUEUE_PROPERTIES_ENABLE_PROFILING);
	EXPECT_EQ(AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING,
		  1 << AMD_QUEUE_PROPERTIES_ENABLE_PROFILING_SHIFT);

	EXPECT_EQ(AQL_SIGNAL_KIND_INVALID, AMD_SIGNAL_KIND_INVALID);
	EXPECT_EQ(AQL_SIGNAL_KIND_USER, AMD_SIGNAL_KIND_USER);
	EXPECT_EQ(AQL_SIGNAL_KIND_DOORBELL, AMD_SIGNAL_KIND_DOORBELL);

	EXPECT_EQ(AQL_DISPATCH_DIMS_MASK,
		  ((1u << HSA_KERNEL_DISPATCH_PACKET_SETUP_WIDTH_DIMENSIONS) - 1)
			  << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS);

	EXPECT_EQ(AQL_QUEUE_MULTI, HSA_QUEUE_TYPE_MULTI);
	EXPECT_EQ(AQL_QUEUE_SINGLE, HSA_QUEUE_TYPE_SINGLE);
}

/* Every header our encoder makes equals the one ROCr code would build. */
static void check_header_encoding(void)
{
	unsigned int type, barrier, acq, rel;

	for (type = AQL_PACKET_VENDOR_SPECIFIC; type <= AQL_PACKET_BARRIER_OR; type++)
	for (barrier = 0; barrier <= 1; barrier++)
	for (acq = AQL_FENCE_NONE; acq <= AQL_FENCE_SYSTEM; acq++)
	for (rel = AQL_FENCE_NONE; rel <= AQL_FENCE_SYSTEM; rel++) {
		uint16_t ours = aql_packet_header(type, barrier, acq, rel);
		uint16_t rocr = (uint16_t)(
			type << HSA_PACKET_HEADER_TYPE |
			barrier << HSA_PACKET_HEADER_BARRIER |
			acq << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE |
			rel << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);

		if (ours == rocr) {
			passed++;
			continue;
		}
		failed++;
		printf("FAIL: aql_packet_header(type %u, barrier %u, acquire %u, release %u) = 0x%04x, ROCr header = 0x%04x\n",
		       type, barrier, acq, rel, ours, rocr);
	}
}

int main(void)
{
	check_dispatch_packet();
	check_agent_packet();
	check_barrier_packets();
	check_barrier_value_packet();
	check_hsa_queue();
	check_amd_queue();
	check_signal();
	check_constants();
	check_header_encoding();

	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}

#endif
