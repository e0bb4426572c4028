/* SPDX-License-Identifier: MIT */
/*
 * Device side of channels (aql/channel.h): work-items send messages to a
 * host consumer, and make requests the host answers (RPC). Included by
 * aql/kernel.h; compiles for amdgcn, nvptx64 and the CPU agent.
 *
 * A kernel takes the channel as an argument, written
 * (aql_global aql_channel_dev *, name), and the host passes the
 * aql_channel * from aql_channel_create() with AQL_ARG().
 *
 * What the device needs from memory (channel_abi.h): read-modify-write
 * only on the descriptor in agent memory (a ticket fetch-add, or a
 * compare-exchange in drop mode, and counters), and on host memory only
 * atomic 64-bit loads and stores at system scope plus plain payload
 * stores. A GPU without PCIe atomics therefore runs it unchanged.
 *
 * Guarantees: no message is lost or duplicated; messages are received in
 * ticket order, so one work-item's messages keep their order. A full
 * channel makes the sender wait (backpressure) unless it was created in
 * drop mode, where the send returns AQL_CHANNEL_DROPPED and the drop is
 * counted. A sender stopped between taking its ticket and publishing its
 * header (preempted) holds the consumer at that ticket until it runs
 * again; other senders go on until the ring wraps to that slot.
 */
#ifndef AQL_KERNEL_CHANNEL_H
#define AQL_KERNEL_CHANNEL_H

#include <aql/channel_abi.h>

#if defined(AQL_KERNEL_TARGET_HOST)
/*
 * libaql functions the loader binds in host code objects: wake the
 * consumer of the channel in aql_channel_ring.host_wake; wait until the
 * channel dev has released the tickets below need - slot_count (spin,
 * then sleep on the ring's room_seq); back off for the round-th time in
 * another wait (spin, then yield, then sleep).
 */
void aql_channel_host_wake(uint64_t channel);
void aql_channel_host_wait_room(uint64_t dev, uint64_t need);
void aql_channel_host_pause(uint32_t round);
#endif

/*
 * Accesses to host memory, at system scope: a GPU's L2 would otherwise
 * keep the stores from the CPU and the CPU's stores from the GPU.
 */
#if defined(AQL_KERNEL_TARGET_AMDGCN)
#define AQL_SYSTEM_SCOPE_ 5	/* __HIP_MEMORY_SCOPE_SYSTEM */
AQL_INLINE uint64_t aql_sys_load_acquire_u64_(aql_global uint64_t *p)
{
	return __hip_atomic_load(p, __ATOMIC_ACQUIRE, AQL_SYSTEM_SCOPE_);
}

AQL_INLINE void aql_sys_store_release_u64_(aql_global uint64_t *p, uint64_t v)
{
	__hip_atomic_store(p, v, __ATOMIC_RELEASE, AQL_SYSTEM_SCOPE_);
}

AQL_INLINE uint32_t aql_sys_load_u32_(aql_global uint32_t *p)
{
	return __hip_atomic_load(p, __ATOMIC_RELAXED, AQL_SYSTEM_SCOPE_);
}

AQL_INLINE void aql_sys_store_u32_(aql_global uint32_t *p, uint32_t v)
{
	__hip_atomic_store(p, v, __ATOMIC_RELAXED, AQL_SYSTEM_SCOPE_);
}

/*
 * Publish a header so that the load of sleeping after it cannot be
 * ordered before it: the sender's half of the handshake with the
 * consumer's seq_cst exchange of sleeping and load of the header. The
 * host's membarrier does not reach a GPU: its senders always fence.
 */
AQL_INLINE void aql_channel_publish_(uint32_t flags, aql_global uint64_t *hdr, uint64_t v)
{
	(void)flags;
	aql_sys_store_release_u64_(hdr, v);
	__builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "");
}

/* Agent-memory loads of the descriptor's counters. */
AQL_INLINE uint64_t aql_agent_load_acquire_u64_(aql_global uint64_t *p)
{
	return __hip_atomic_load(p, __ATOMIC_ACQUIRE, AQL_AGENT_SCOPE_);
}
#elif defined(AQL_KERNEL_TARGET_NVPTX)
/* membar.sys orders against the host; volatile keeps the access. */
AQL_INLINE uint64_t aql_sys_load_acquire_u64_(aql_global uint64_t *p)
{
	uint64_t v = *(volatile aql_global uint64_t *)p;

	__nvvm_membar_sys();
	return v;
}

AQL_INLINE void aql_sys_store_release_u64_(aql_global uint64_t *p, uint64_t v)
{
	__nvvm_membar_sys();
	*(volatile aql_global uint64_t *)p = v;
}

AQL_INLINE uint32_t aql_sys_load_u32_(aql_global uint32_t *p)
{
	return *(volatile aql_global uint32_t *)p;
}

AQL_INLINE void aql_sys_store_u32_(aql_global uint32_t *p, uint32_t v)
{
	*(volatile aql_global uint32_t *)p = v;
}

/*
 * st.release (sm_70 and up) orders the payload before the header without
 * a full fence of its own; membar.sys then orders it before the load of
 * sleeping: one full fence per message, where the release store above
 * would make two.
 */
AQL_INLINE void aql_channel_publish_(uint32_t flags, aql_global uint64_t *hdr, uint64_t v)
{
	(void)flags;
	__asm__ __volatile__("st.release.sys.global.u64 [%0], %1;" ::"l"(hdr), "l"(v) : "memory");
	__nvvm_membar_sys();
}

AQL_INLINE uint64_t aql_agent_load_acquire_u64_(aql_global uint64_t *p)
{
	uint64_t v = *(volatile aql_global uint64_t *)p;

	__nvvm_membar_gl();
	return v;
}
#else
AQL_INLINE uint64_t aql_sys_load_acquire_u64_(uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

AQL_INLINE void aql_sys_store_release_u64_(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/*
 * Only the load of sleeping uses it. seq_cst, so that with the fence-mode
 * publish (a seq_cst exchange) the handshake holds in C11's terms too, not
 * only on x86; a plain load on x86, so it costs nothing there.
 */
AQL_INLINE uint32_t aql_sys_load_u32_(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

AQL_INLINE void aql_sys_store_u32_(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/*
 * The header's release store, then the store-load order the handshake
 * needs before the load of sleeping. A CPU sender pays nothing for it:
 * before the consumer re-checks the header it runs membarrier(), which
 * makes every running thread of the process execute a full fence, so
 * that either this thread's load comes after that fence (and sees
 * sleeping = 1) or its header store came before it (and the re-check
 * sees the header). A compiler barrier keeps the load after the store in
 * program order, which is all the kernel's fence needs: the same
 * reasoning as for a signal handler, hence the signal fence. The
 * ticket's fetch-add is then the one full barrier per message. Where
 * the host could not register membarrier, the channel asks for a real
 * fence (AQL_CHANNEL_DEV_FENCE).
 */
AQL_INLINE void aql_channel_publish_(uint32_t flags, uint64_t *hdr, uint64_t v)
{
	if (flags & AQL_CHANNEL_DEV_FENCE) {
		/* The store and the full fence in one locked instruction (and
		 * no bare fence, which ThreadSanitizer does not model). */
		__atomic_exchange_n(hdr, v, __ATOMIC_SEQ_CST);
		return;
	}
	__atomic_store_n(hdr, v, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

AQL_INLINE uint64_t aql_agent_load_acquire_u64_(uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
#endif

/* One round of waiting: short on a GPU, escalating on the CPU agent. */
AQL_INLINE void aql_channel_pause_(uint32_t round)
{
#if defined(AQL_KERNEL_TARGET_AMDGCN)
	(void)round;
	__builtin_amdgcn_s_sleep(2);
#elif defined(AQL_KERNEL_TARGET_NVPTX)
	(void)round;
	__nvvm_membar_cta();
#else
	aql_channel_host_pause(round);
#endif
}

/*
 * Generic pointers: the reply of a call may be private memory. On the
 * host, words then bytes, and the empty asm keeps the compiler from
 * turning the loop into a call of libc's memcpy: under ThreadSanitizer
 * that is an interceptor, which would record the stores of a kernel
 * whose release of them it cannot see, and report the consumer's reads.
 */
AQL_INLINE void aql_channel_copy_(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	uint32_t i = 0;

#if defined(AQL_KERNEL_TARGET_HOST)
	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		__builtin_memcpy(&w, src + i, 8);
		__builtin_memcpy(dst + i, &w, 8);
		__asm__("" ::: "memory");
	}
#endif
	for (; i < n; i++)
		dst[i] = src[i];
}

AQL_INLINE aql_global aql_channel_ring *aql_channel_ring_(aql_global aql_channel_dev *ch)
{
	return (aql_global aql_channel_ring *)(uintptr_t)ch->ring;
}

/*
 * A tail at least need - slot_count if there is one: the cached
 * tail_seen when it is enough, else the consumer's own (one host-memory
 * read), which then raises tail_seen for the other senders.
 */
AQL_INLINE uint64_t aql_channel_tail_(aql_global aql_channel_dev *ch, uint64_t need)
{
	uint64_t seen = aql_agent_load_acquire_u64_(&ch->tail_seen);
	uint64_t tail, old;

	if (need <= seen + ch->slot_count)
		return seen;
	tail = aql_sys_load_acquire_u64_(&aql_channel_ring_(ch)->tail);
	/* Ordered (not relaxed), so a sender that trusts tail_seen also
	 * sees what the consumer did before it released those slots. */
	while (seen < tail) {
		old = aql_atomic_cas_u64(&ch->tail_seen, seen, tail, AQL_SEQ_CST);
		if (old == seen)
			break;
		seen = old;
	}
	return tail;
}

/* Take k tickets into *t; nonzero if drop mode found no room. */
AQL_INLINE int aql_channel_reserve_(aql_global aql_channel_dev *ch, uint32_t k,
				    uint64_t *t)
{
	uint64_t h, old;

	if (!(ch->flags & AQL_CHANNEL_DEV_DROP)) {
		*t = aql_atomic_add_u64(&ch->head, k, AQL_RELAXED);
		return 0;
	}
	h = aql_atomic_cas_u64(&ch->head, 0, 0, AQL_RELAXED);
	for (;;) {
		if (h + k > aql_channel_tail_(ch, h + k) + ch->slot_count) {
			aql_atomic_add_u64(&ch->drops, 1, AQL_RELAXED);
			return 1;
		}
		old = aql_atomic_cas_u64(&ch->head, h, h + k, AQL_RELAXED);
		if (old == h)
			break;
		h = old;
	}
	*t = h;
	return 0;
}

/* Wait until tickets t .. t+k-1 are free: the consumer released them. */
AQL_INLINE void aql_channel_wait_room_(aql_global aql_channel_dev *ch, uint64_t t,
				       uint32_t k)
{
	if (t + k <= aql_channel_tail_(ch, t + k) + ch->slot_count)
		return;
	aql_atomic_add_u64(&ch->full_waits, 1, AQL_RELAXED);
#if defined(AQL_KERNEL_TARGET_HOST)
	/* Sleeping senders would each hold up the consumer in turn: they
	 * sleep until the consumer says there is room. */
	aql_channel_host_wait_room((uint64_t)(uintptr_t)ch, t + k);
#else
	for (uint32_t round = 0; t + k > aql_channel_tail_(ch, t + k) + ch->slot_count;)
		aql_channel_pause_(round++);
#endif
}

#if defined(AQL_KERNEL_TARGET_HOST)
/*
 * A CPU sender's stores to a slot wait in its store buffer until the
 * slot's cache line comes back from the consumer, which read it a lap
 * ago; the next send's locked fetch-add waits for them. Asking for the
 * line of the slot a few tickets ahead, for writing, overlaps that
 * transfer with the sends in between. With several senders the slot may
 * be another's: a line moved for nothing, never a wrong one.
 */
#define AQL_CHANNEL_PREFETCH_ 4u

AQL_INLINE void aql_channel_prefetch_(uint8_t *p)
{
#if defined(__x86_64__)
	__asm__("prefetchw %0" ::"m"(*p));	/* a no-op where there is none */
#else
	__builtin_prefetch(p, 1, 3);
#endif
}
#endif

/* Slots a message of bytes payload bytes takes: mostly one, no division. */
AQL_INLINE uint32_t aql_channel_slots_(aql_global aql_channel_dev *ch, uint32_t bytes)
{
	uint32_t size = ch->slot_size;

	return bytes + AQL_CHANNEL_HDR_BYTES <= size ? 1u : AQL_CHANNEL_SLOTS(bytes, size);
}

/* Copy n bytes to the ring at byte offset off, wrapping at end; the offset after. */
AQL_INLINE uint64_t aql_channel_write_(aql_global uint8_t *slots, uint64_t end, uint64_t off,
				       const void *src, uint32_t n)
{
	uint32_t room;

	if (n < end - off) {
		aql_channel_copy_(slots + off, (const uint8_t *)src, n);
		return off + n;
	}
	room = (uint32_t)(end - off);	/* at most n */
	aql_channel_copy_(slots + off, (const uint8_t *)src, room);
	aql_channel_copy_(slots, (const uint8_t *)src + room, n - room);
	return n - room;
}

/*
 * Write the payload (a then b) of the message at ticket t, publish its
 * header, and wake the consumer if it sleeps.
 */
AQL_INLINE void aql_channel_put_(aql_global aql_channel_dev *ch, uint64_t t,
				 uint32_t kind, const void *a, uint32_t alen,
				 const void *b, uint32_t blen)
{
	aql_global uint8_t *slots = (aql_global uint8_t *)(uintptr_t)ch->slots;
	aql_global aql_channel_ring *ring = aql_channel_ring_(ch);
	uint64_t first = (uint64_t)((uint32_t)t & (ch->slot_count - 1)) * ch->slot_size;
	uint64_t end = (uint64_t)ch->slot_count * ch->slot_size;
	uint64_t off;

#if defined(AQL_KERNEL_TARGET_HOST)
	aql_channel_prefetch_(slots + (uint64_t)((uint32_t)(t + AQL_CHANNEL_PREFETCH_) &
						 (ch->slot_count - 1)) * ch->slot_size);
#endif
	off = aql_channel_write_(slots, end, first + AQL_CHANNEL_HDR_BYTES, a, alen);

	if (blen)
		aql_channel_write_(slots, end, off, b, blen);
	/*
	 * Release: the payload is visible before the header says it is.
	 * And Dekker with the consumer, which sets sleeping, then reads this
	 * header: one of the two sees the other's store (publish_ says how
	 * each target orders the header store before the load below).
	 */
	aql_channel_publish_(ch->flags, (aql_global uint64_t *)(slots + first),
			     AQL_CHANNEL_HDR(t, kind, alen + blen));
	if (aql_sys_load_u32_(&ring->sleeping)) {
		aql_sys_store_u32_(&ring->sleeping, 0);
#if defined(AQL_KERNEL_TARGET_HOST)
		aql_channel_host_wake(ring->host_wake);
#elif defined(AQL_KERNEL_TARGET_AMDGCN)
		if (ring->event_mailbox) {
			uint32_t id = __builtin_amdgcn_readfirstlane(ring->event_id);

			aql_sys_store_u32_((aql_global uint32_t *)(uintptr_t)ring->event_mailbox, id);
			__builtin_amdgcn_s_sendmsg(1, id & 0xffu);	/* MSG_INTERRUPT */
		}
#endif
		/* nvptx has no interrupt: the consumer polls (aql/channel.h). */
	}
}

/*
 * Send bytes bytes at data as one message of kind (AQL_CHANNEL_KIND_DATA
 * or AQL_CHANNEL_KIND_USER and up). Waits while the channel is full
 * unless it is in drop mode. Returns AQL_CHANNEL_SENT, _DROPPED or
 * _TOO_BIG.
 */
AQL_INLINE int aql_channel_send(aql_global aql_channel_dev *ch, uint32_t kind,
				const void *data, uint32_t bytes)
{
	uint64_t t;
	uint32_t k;

	if (bytes > ch->max_bytes)
		return AQL_CHANNEL_TOO_BIG;
	k = aql_channel_slots_(ch, bytes);
	if (aql_channel_reserve_(ch, k, &t))
		return AQL_CHANNEL_DROPPED;
	aql_channel_wait_room_(ch, t, k);
	aql_channel_put_(ch, t, kind, data, bytes, NULL, 0);
	return AQL_CHANNEL_SENT;
}

/* Send the value of an lvalue, typed struct or scalar, as one message. */
#define AQL_CHANNEL_SEND(ch, lvalue)                                           \
	aql_channel_send((ch), AQL_CHANNEL_KIND_DATA, &(lvalue), sizeof(lvalue))

/*
 * Work-group aggregated send: every work-item of the group calls it with
 * the same bytes, and one ticket fetch-add reserves the group's slots,
 * which follow in local linear id order. scratch is one uint64_t of LDS
 * that no other code uses during the call. Calls aql_barrier() twice, so
 * every work-item must call it. In drop mode the whole group's messages
 * are dropped together (and each counted) when they do not all fit.
 */
AQL_INLINE int aql_channel_send_group(aql_global aql_channel_dev *ch,
				      aql_local uint64_t *scratch, uint32_t kind,
				      const void *data, uint32_t bytes)
{
	uint32_t n = aql_local_size(0) * aql_local_size(1) * aql_local_size(2);
	uint32_t k, lid = aql_local_linear_id();
	uint64_t base;

	if (bytes > ch->max_bytes)
		return AQL_CHANNEL_TOO_BIG;
	k = aql_channel_slots_(ch, bytes);
	if (lid == 0) {
		uint64_t t = 0;

		*scratch = aql_channel_reserve_(ch, n * k, &t) ? UINT64_MAX : t;
		if (*scratch == UINT64_MAX && n > 1)
			aql_atomic_add_u64(&ch->drops, n - 1, AQL_RELAXED);
	}
	aql_barrier();
	base = *scratch;
	aql_barrier();
	if (base == UINT64_MAX)
		return AQL_CHANNEL_DROPPED;
	aql_channel_wait_room_(ch, base + (uint64_t)lid * k, k);
	aql_channel_put_(ch, base + (uint64_t)lid * k, kind, data, bytes, NULL, 0);
	return AQL_CHANNEL_SENT;
}

/*
 * Ask the host to run the handler registered for opcode (aql/channel.h)
 * on the req_bytes at req, and wait for its reply: up to reply_cap bytes
 * are copied to reply, and *reply_bytes (if not NULL) gets the reply's
 * full size. Returns the handler's result (zero or more), or an
 * AQL_CHANNEL_CALL_* error. The channel needs reply slots and a host
 * thread serving it; a work-item waits while all reply slots are taken.
 */
AQL_INLINE int32_t aql_channel_call(aql_global aql_channel_dev *ch, uint32_t opcode,
				    const void *req, uint32_t req_bytes, void *reply,
				    uint32_t reply_cap, uint32_t *reply_bytes)
{
	uint32_t n = ch->reply_count, k, got, round = 0;
	aql_channel_rpc_req head;
	aql_global uint8_t *slot;
	aql_global aql_channel_reply *r;
	uint64_t ticket, lap, t;
	int32_t status;

	if (!n)
		return AQL_CHANNEL_CALL_NO_REPLIES;
	if (req_bytes > ch->max_bytes - sizeof(head))
		return AQL_CHANNEL_CALL_TOO_BIG;
	ticket = aql_atomic_add_u64(&ch->rpc_next, 1, AQL_RELAXED);
	lap = ticket / n;
	slot = (aql_global uint8_t *)(uintptr_t)ch->replies +
	       (uint64_t)(ticket & (n - 1)) * ch->reply_size;
	r = (aql_global aql_channel_reply *)slot;
	/* The requester a lap earlier must have read its reply. */
	while (aql_sys_load_acquire_u64_(&r->free) != lap)
		aql_channel_pause_(round++);
	head.ticket = ticket;
	head.opcode = opcode;
	head.bytes = req_bytes;
	k = aql_channel_slots_(ch, (uint32_t)sizeof(head) + req_bytes);
	if (aql_channel_reserve_(ch, k, &t)) {
		aql_sys_store_release_u64_(&r->free, lap + 1);
		return AQL_CHANNEL_CALL_DROPPED;
	}
	aql_channel_wait_room_(ch, t, k);
	aql_channel_put_(ch, t, AQL_CHANNEL_KIND_RPC, &head, sizeof(head), req, req_bytes);
	round = 0;
	while (aql_sys_load_acquire_u64_(&r->done) != ticket + 1)
		aql_channel_pause_(round++);
	status = r->status;
	got = r->bytes;
	if (reply_bytes)
		*reply_bytes = got;
	aql_channel_copy_((uint8_t *)reply, (const uint8_t *)(slot + AQL_CHANNEL_REPLY_HDR_BYTES),
			  got < reply_cap ? got : reply_cap);
	/* Release: the reply is read before the slot passes on. */
	aql_sys_store_release_u64_(&r->free, lap + 1);
	return status;
}

#endif
