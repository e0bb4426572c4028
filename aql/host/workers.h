/* SPDX-License-Identifier: MIT */
/*
 * Internal: the CPU agent's worker threads. A dispatch becomes a job whose
 * work-groups the workers and the submitting processor take one at a time.
 */
#ifndef AQL_INTERNAL_WORKERS_H
#define AQL_INTERNAL_WORKERS_H

#include <aql/host_kernel.h>
#include <aql/status.h>

struct aql_wg_exec;
struct aql_pool;

struct aql_job {
	const aql_dispatch_packet *packet;
	const aql_host_kernel_descriptor *kd;
	uint64_t dispatch_id;
	uint64_t total;		/* work-groups */
	uint64_t next;		/* next work-group to hand out */
	uint32_t fault;		/* a work-group returned non-zero */
	uint32_t refs;		/* workers inside the job; under the pool lock */
	struct aql_job *link;
};

aql_status aql_pool_create(uint32_t workers, uint32_t max_workitems, struct aql_pool **out);

/* Stops and joins the workers; no job may be running. */
void aql_pool_destroy(struct aql_pool *pool);

/*
 * Run every work-group of job, with exec (the caller's executor) taking
 * part, and return once all are done and no worker touches job any more.
 * Returns 0, or -1 if any work-group faulted.
 */
int aql_pool_run(struct aql_pool *pool, struct aql_wg_exec *exec, struct aql_job *job);

#endif
