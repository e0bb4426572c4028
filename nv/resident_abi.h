/* SPDX-License-Identifier: MIT */
/*
 * Internal: what the host half of a resident CUDA queue (nv/resident.c)
 * and its processor kernel (nv/resident_kernel.c, built by aql-kcc for
 * the GPU and for the emulated driver's host build) share. Plain C and
 * OpenCL C alike: fixed-width fields, addresses as uint64_t.
 */
#ifndef AQL_NV_RESIDENT_ABI_H
#define AQL_NV_RESIDENT_ABI_H

/* Threads per processor block: the largest work-group it runs. */
#define AQL_RES_BLOCK 256u
/* Entries of the ring of signals whose sleeping waiters the host wakes. */
#define AQL_RES_WAKE 64u

/* A kernel the processor runs: dispatches whose kernel_object is object
 * call case index of the linked switch. */
#define AQL_RES_NO_BARRIER 1u	/* its _aql_dev_nb form: any group size */
struct aql_res_kernel {
	uint64_t object;
	uint32_t index;
	uint32_t flags;
};

/*
 * The queue's control block, in pinned host memory mapped for the device.
 * The host writes the first part before the launch and stop, returned and
 * wake_head after; the device writes handed and wake_tail.
 */
struct aql_res_ctl {
	uint64_t ring;			/* aql_packet[mask + 1] */
	uint64_t read_index;		/* &amd_queue.read_dispatch_id */
	uint64_t kernels;		/* struct aql_res_kernel[kernel_count] */
	uint64_t state;			/* struct aql_res_state, device memory */
	uint32_t kernel_count;
	uint32_t mask;
	uint64_t stop;			/* host: leave between packets */
	uint64_t handed;		/* device: id + 1 of a packet for the host */
	uint64_t returned;		/* host: id + 1 once it has run it */
	uint64_t wake_tail;		/* device: signals pushed */
	uint64_t wake_head;		/* host: signals woken */
	uint64_t wake[AQL_RES_WAKE];
};

/*
 * Device memory the blocks share (device-scope atomics): the packet they
 * run (cur) and the work-groups of it claimed (claim: the low 32 bits of
 * the packet id above, the count below, so that a block that read an
 * older cur never claims a unit of the next packet) and done.
 */
struct aql_res_state {
	uint64_t cur;
	uint64_t claim;
	uint64_t done;
};

#endif
