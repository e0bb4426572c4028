/* SPDX-License-Identifier: MIT */
/*
 * A model of the MPSC channel's send/receive protocol (the design behind
 * include/aql/channel_abi.h), checked by spin. tests/model/run_spin.py
 * checks each variant below and asserts spin's verdict.
 *
 * Modelled:
 *   - NP producers sending M messages each (the last one MLAST) of k = 1
 *     or 2 slots, k chosen per message nondeterministically, into a ring
 *     of S slots. With 3 producers, 5 or 6 messages take 5 to 12 tickets:
 *     2.5 to 6 laps of a 2-slot ring.
 *   - BLOCK mode: fetch_add of k on head, then wait until
 *     t + k - tail <= S. DROP mode (-DDROP): load head into h; if
 *     h + k - tail > S, count a drop; else compare-and-swap head from h to
 *     h + k, and on failure take the head seen as h and check again.
 *   - The payload written with plain stores, a step per slot, before the
 *     release store of the first slot's header (ticket + 1 and the size:
 *     one 64-bit word, so one step). The payload names the producer and
 *     its own sequence number. A 2-slot message's payload fills the second
 *     slot, including the word where a header would be.
 *   - Then: load sleeping; if it is set, store 0 to it, then write the
 *     eventfd. The load may pass the header store (x86's store buffer;
 *     TSO): the producer either stores the header, then loads sleeping,
 *     or loads sleeping, and the header becomes visible as its next step,
 *     with any steps of the others in between. That is all TSO allows
 *     here: stores leave the buffer in order, and the producer's next
 *     store (sleeping = 0), read-modify-write (the next ticket) or system
 *     call (the eventfd) comes after the header. pend[id] is 1 while the
 *     header waits in the buffer. The payload is made visible at once:
 *     earlier than the hardware would, which no reader can exploit, as
 *     the consumer reads it only after the header.
 *   - One consumer reading in ticket order with a private pos. It stores
 *     tail after every 2 messages and whenever it finds the ring empty,
 *     then sleeps: sleeping = 1 (an exchange: a full fence), membarrier()
 *     (each producer's buffer drains, one producer after another),
 *     re-check the header at pos (ready: store 0 and go on), else block
 *     until the eventfd is non-zero, read it, and look again.
 *   - SENDER_FENCE (AQL_CHANNEL_FENCE, and GPU senders): the producer
 *     fences between the header store and the load of sleeping, which
 *     then cannot pass it, and the consumer calls no membarrier().
 *
 * Checked, by an exhaustive safety search:
 *   - every receive against the producer's next sequence number (BLOCK:
 *     equal; DROP: not lower, and not a dropped one), so a lost,
 *     duplicated, reordered, stale or torn message fails;
 *   - at the end, all messages in (DROP: received + dropped = sent);
 *   - producers write only released slots;
 *   - no invalid end state: a lost wake-up leaves the consumer blocked on
 *     the eventfd for good, a missed release leaves producers blocked on
 *     tail.
 *
 * Not modelled:
 *   - Memory order beyond the producers' store buffers: the consumer's
 *     stores (tail, sleeping) are visible at once (its exchange of
 *     sleeping is a full fence; a late tail only delays producers), and
 *     orders weaker than TSO (arm64, GPUs) are argued in the C code: the
 *     release/acquire pairs for payload and header, and a full fence on
 *     each side of the sleep handshake, which is what is modelled here.
 *   - Counter wrap: 64-bit tickets and the 32-bit seq never wrap in runs
 *     this small (the ring does).
 *   - The eventfd's count: a read returns and clears it and the consumer
 *     only asks whether it is zero, so a bit stands for it.
 *   - A few steps are merged where no other process can tell the
 *     difference, to keep the state space small: the consumer reads a
 *     message's payload in one step (it owns the slots until it stores
 *     tail; a producer that writes them early, BUG_EARLY_RELEASE, is
 *     caught all the same); DROP's load of tail and its drops++ are one
 *     step (only the consumer's exit test reads drops).
 *   - Timeouts, statistics, kinds, RPC replies, the copy of wrapped
 *     messages, more than one consumer thread.
 *
 * Options (spin -D...): S, NP, M, MLAST; DROP; SENDER_FENCE (above; the
 * smaller state space of the two, for the runs that check other parts of
 * the protocol); TAIL_SEEN (producers check
 * ctl's tail_seen, the largest tail loaded so far, before loading the
 * ring's, and raise it with an atomic max); LOOKALIKE (payload in a second
 * slot's header word happens to read as the header the consumer looks for
 * there on the next lap; the consumer zeroes that word before it stores
 * tail, as channel/channel.c does). Seeded bugs, each of which spin must
 * reject: BUG_NO_CLEAR (the consumer does not zero it: it takes the
 * payload for a message and delivers garbage), BUG_NO_RECHECK, BUG_WAKE_EARLY, BUG_NO_FLUSH (lost wake-up or
 * deadlock), BUG_HDR_FIRST, BUG_EARLY_RELEASE (stale payload),
 * BUG_DROP_NO_CAS (DROP: head moved by a load and a store),
 * BUG_NO_MEMBARRIER (neither the consumer's membarrier nor a sender
 * fence: the sender's load of sleeping passes its buffered header, and
 * the wake-up is lost).
 */

#ifndef S
#define S 2			/* ring slots */
#endif
#ifndef NP
#define NP 3			/* producers */
#endif
#ifndef M
#define M 2			/* messages per producer */
#endif
#ifndef MLAST
#define MLAST M			/* messages of the last producer */
#endif
#define MSGS(id) ((id) == NP - 1 -> MLAST : M)
#define TOTAL ((NP - 1) * M + MLAST)

/* ctl (agent memory): the only words producers read-modify-write */
byte head;			/* the next ticket */
byte drops;			/* DROP: messages dropped */
#ifdef TAIL_SEEN
byte tail_seen;			/* the largest tail a producer has loaded */
#endif

/* ring (host memory) */
byte tail;			/* tickets the consumer has released */
bit sleeping;			/* 1: the consumer sleeps, or is about to */
bit evfd;			/* the eventfd: zero or not */

/* the slots: a header word (seq, size in slots) and a payload word */
byte hseq[S];			/* ticket + 1 of the message starting here */
byte hk[S];			/* its size in slots */
byte dat[S];			/* MSG(producer, its sequence number) */

/* A payload word; 0 (never written) names no producer. */
#define MSG(id, i) (((id) + 1) * 16 + (i))
#define MSG_PID(w) ((w) / 16)
#define MSG_SEQ(w) ((w) % 16)

/* 1 while a producer's header store waits in its store buffer */
bit pend[NP];

/* for the assertions only: the sequence numbers each producer dropped */
byte dropmask[NP];

/*
 * Reachability: with -DSEE=n, getting to point n (where c holds) fails an
 * assertion, which shows that the runs do go through it. Points: 1 the
 * consumer woken by the eventfd, 2 a producer's slots not yet free when it
 * takes its ticket, 3 a drop, 4 a failed CAS, 5 the consumer's re-check
 * finding a message, 6 the consumer done, 7 a message wrapping at the end
 * of the ring, 8 a producer writing the eventfd, 9 a producer storing 0
 * to sleeping when another store of 0 came after its load, 10 a load of
 * sleeping passing the header store.
 */
#ifndef SEE
#define SEE 0
#endif
#define SEEN(n, c) assert(!(SEE == (n) && (c)))

/*
 * A producer writes only slots the consumer has released. tail only grows,
 * so what the backpressure wait (or DROP's check) saw still holds.
 */
#define FREE_CHECK assert(t + k - tail <= S)

/* Wake the consumer if sl, what the load of sleeping returned, is set. */
inline wake()
{
	if
	:: sl ->
		d_step { SEEN(9, sleeping == 0); sleeping = 0; sl = 0 };
		d_step { evfd = 1; SEEN(8, 1) }
	:: else
	fi
}

/*
 * Steps 4 to 6 of a send: the payload, the header, the wake-up. The ticket
 * t and size k are reserved and the slots free.
 */
inline commit()
{
#ifdef BUG_HDR_FIRST
	/* seeded bug: the header before the payload */
	d_step { hseq[t % S] = t + 1; hk[t % S] = k };
#endif
	/* the payload: plain stores, a step per slot */
	if
	:: d_step { k == 1 -> FREE_CHECK; dat[t % S] = MSG(id, i) }
	:: d_step { k == 2 -> FREE_CHECK; dat[t % S] = MSG(id, i) };
		d_step {
#ifdef LOOKALIKE
			/*
			 * The payload bytes in the second slot's header word read
			 * as the header of the ticket the consumer will look for in
			 * this slot on the next lap (the application chooses what
			 * it sends).
			 */
			hseq[(t + 1) % S] = t + 1 + S + 1;
			hk[(t + 1) % S] = 1;
#else
			hseq[(t + 1) % S] = 0;
			hk[(t + 1) % S] = 0;
#endif
			dat[(t + 1) % S] = MSG(id, i)
		}
	fi;
#ifdef BUG_WAKE_EARLY
	/* seeded bug: the wake-up before the header is stored */
	sl = sleeping;
	wake();
	d_step { hseq[t % S] = t + 1; hk[t % S] = k; i++; k = 0; t = 0 }
#elif defined(BUG_HDR_FIRST)
	d_step { sl = sleeping; i++; k = 0; t = 0 };
	wake()
#else
	/* store_release of the header, and the load of sleeping */
	if
	:: d_step { hseq[t % S] = t + 1; hk[t % S] = k; sl = sleeping; i++; k = 0; t = 0 }
#ifndef SENDER_FENCE
	:: d_step { sl = sleeping; pend[id] = 1; SEEN(10, 1) };	/* the load passes the store */
		d_step { hseq[t % S] = t + 1; hk[t % S] = k; pend[id] = 0; i++; k = 0; t = 0 }
#endif
	fi;
	wake()
#endif
}

proctype producer(byte id)
{
	byte i, k, t;
	bit sl;			/* what the load of sleeping returned */
#ifdef DROP
	byte h;
#endif
#ifdef TAIL_SEEN
	byte tl;
#endif

	do
	:: i == MSGS(id) -> break
	:: else ->
#ifdef DROP
		atomic {
			if
			:: k = 1
			:: k = 2
			fi;
			h = head
		}
retry:
		if
		:: d_step {	/* full: drop (the load of tail, then the count) */
			h + k - tail > S ->
				drops++;
				SEEN(3, 1);
				dropmask[id] = dropmask[id] | (1 << i);
				i++; k = 0; h = 0
		   }
		:: else ->
#ifdef BUG_DROP_NO_CAS
			/* seeded bug: a plain store instead of the CAS */
			d_step { head = h + k; t = h; h = 0 };
#else
			if
			:: d_step { head == h -> head = h + k; t = h; h = 0 }	/* CAS */
			:: d_step { head != h -> h = head; SEEN(4, 1) };	/* failed: h is the head seen */
				goto retry
			fi;
#endif
			commit()
		fi
#else
		atomic {
			if
			:: k = 1
			:: k = 2
			fi;
			t = head;	/* fetch_add */
			head = head + k;
			SEEN(2, t + k - tail > S)
		}

		/* backpressure */
#ifdef TAIL_SEEN
		if
		:: t + k - tail_seen <= S
		:: else ->
			atomic { t + k - tail <= S -> tl = tail };
			d_step {	/* atomic max */
				if
				:: tl > tail_seen -> tail_seen = tl
				:: else
				fi;
				tl = 0
			}
		fi;
#else
		t + k - tail <= S;
#endif
		commit()
#endif
	od
}

proctype consumer()
{
	byte pos;		/* the next ticket to read */
	byte batch;		/* messages read since tail was last stored */
	byte got;		/* messages received */
	byte k, w, w2, p, q;
	byte next[NP];		/* per producer: the lowest sequence number due */
	byte count[NP];		/* per producer: messages received */
	byte j, n, b;

	do
#ifdef DROP
	:: got + drops == TOTAL -> break
#else
	:: got == TOTAL -> break
#endif
	:: d_step { batch == 2 -> tail = pos; batch = 0 }	/* store_release */
	:: atomic {	/* load_acquire of the header at pos: ready? */
		batch < 2 && hseq[pos % S] == pos + 1 -> k = hk[pos % S]
	   } ->
#ifdef BUG_EARLY_RELEASE
		/* seeded bug: the slots released before the payload is read */
		tail = pos + k;
#endif
		d_step {	/* read and deliver: once, in order, untorn */
			w = dat[pos % S];
			if
			:: k == 2 -> w2 = dat[(pos + 1) % S]
			:: else -> w2 = w
			fi;
			p = MSG_PID(w);
			q = MSG_SEQ(w);
			assert(k == 1 || k == 2);
			assert(p >= 1 && p <= NP);
			assert(w2 == w);
#ifdef DROP
			assert(q >= next[p - 1] && q < MSGS(p - 1));
			assert((dropmask[p - 1] & (1 << q)) == 0);
#else
			assert(q == next[p - 1]);
#endif
			next[p - 1] = q + 1;
			count[p - 1]++;
			got++;
			SEEN(7, k == 2 && pos % S == S - 1);
			pos = pos + k;
			batch++;
			w = 0; w2 = 0; p = 0; q = 0;
#ifdef BUG_NO_CLEAR
			k = 0
#endif
		}
#ifndef BUG_NO_CLEAR
		/*
		 * Against LOOKALIKE: the consumer zeroes the header word of a
		 * message's second slot before it releases it.
		 */
		if
		:: d_step { k == 2 -> hseq[(pos - 1) % S] = 0; k = 0 }
		:: d_step { k == 1 -> k = 0 }
		fi
#endif
	:: else ->
		/* empty: release what was read, then sleep */
#ifndef BUG_NO_FLUSH
		if
		:: d_step { batch > 0 -> tail = pos; batch = 0 }
		:: else
		fi;
#endif
		sleeping = 1;
#if !defined(SENDER_FENCE) && !defined(BUG_NO_MEMBARRIER)
		/* membarrier(): a full fence on each producer's CPU in turn */
		for (j : 0 .. NP - 1) {
			pend[j] == 0
		}
		j = 0;
#endif
#ifndef BUG_NO_RECHECK
		if
		:: atomic { hseq[pos % S] == pos + 1 -> SEEN(5, 1) };
			sleeping = 0
		:: else ->
#endif
			if
			:: atomic { evfd -> evfd = 0; SEEN(1, 1) }
#ifdef DROP
			/* the host stops the consumer once every send returned */
			:: got + drops == TOTAL
#endif
			fi
#ifndef BUG_NO_RECHECK
		fi
#endif
	od;

	if
	:: batch > 0 -> tail = pos
	:: else
	fi;

	/* all in: each producer's messages, those dropped excepted */
	SEEN(6, 1);
	for (j : 0 .. NP - 1) {
#ifdef DROP
		n = 0;
		for (b : 0 .. MSGS(j) - 1) {
			if
			:: dropmask[j] & (1 << b) -> n++
			:: else
			fi
		}
		assert(count[j] + n == MSGS(j))
#else
		assert(count[j] == MSGS(j) && next[j] == MSGS(j))
#endif
	}
}

init
{
	byte n;

	atomic {
		for (n : 0 .. NP - 1) {
			run producer(n)
		}
		run consumer()
	}
}
