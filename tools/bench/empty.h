/* SPDX-License-Identifier: MIT */
/*
 * The empty dispatch of the default mode's rows (empty.c): a 1-D dispatch
 * of one work-item of a host kernel that returns at once, and the batch
 * submission of the throughput rows. Compiled into aql-bench and into
 * aqlbench-native.so (native_so.c), so both submit the same packets.
 */
#ifndef AQL_BENCH_EMPTY_H
#define AQL_BENCH_EMPTY_H

#include <aql/aql.h>

/* The empty dispatch, system-scope fences; completion may be NULL. */
aql_packet empty_dispatch(int barrier, aql_signal *completion);

/*
 * n packets on q: n - 1 of body, then last, which should signal and set
 * the barrier bit so that its completion implies the rest's. Errors:
 * aql_queue_submit()'s.
 */
aql_status submit_batch(aql_queue *q, const aql_packet *body, const aql_packet *last,
			uint32_t n);

#endif
