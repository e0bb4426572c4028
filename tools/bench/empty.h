/* SPDX-License-Identifier: MIT */
/*
 * The empty dispatch of the default mode's rows (empty.c): a 1-D dispatch
 * of one work-item of a host kernel that returns at once. Compiled into
 * aql-bench and into aqlbench-native.so (native_so.c), so both submit the
 * same packets.
 */
#ifndef AQL_BENCH_EMPTY_H
#define AQL_BENCH_EMPTY_H

#include <aql/aql.h>

/* The empty dispatch, system-scope fences; completion may be NULL. */
aql_packet empty_dispatch(int barrier, aql_signal *completion);

/*
 * n empty dispatches on q, only the last one signalling done. It also sets
 * the barrier bit, so its completion means every packet before it has
 * completed as well. Errors: aql_queue_submit()'s.
 */
aql_status empty_submit_batch(aql_queue *q, int barrier, aql_signal *done, uint32_t n);

#endif
