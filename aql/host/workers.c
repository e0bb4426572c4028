/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "aql/host/workers.h"
#include "aql/host/workgroup.h"

struct aql_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;	/* a job was added, or stop */
	pthread_cond_t idle;	/* a worker left a job */
	struct aql_job *jobs;
	int stop;
	uint32_t n;
	uint32_t max_workitems;
	pthread_t *threads;
};

/* Take work-groups until none is left. */
static void run_groups(struct aql_wg_exec *exec, struct aql_job *job)
{
	uint64_t g;

	while ((g = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->total)
		if (aql_wg_run(exec, job->packet, job->kd, g, job->dispatch_id))
			__atomic_store_n(&job->fault, 1, __ATOMIC_RELAXED);
}

static struct aql_job *find_job(struct aql_pool *pool)
{
	for (struct aql_job *j = pool->jobs; j; j = j->link)
		if (__atomic_load_n(&j->next, __ATOMIC_RELAXED) < j->total)
			return j;
	return NULL;
}

static void *worker_main(void *arg)
{
	struct aql_pool *pool = arg;
	struct aql_wg_exec *exec;
	struct aql_job *job = NULL;

	if (aql_wg_exec_create(pool->max_workitems, &exec) != AQL_OK)
		return NULL;	/* the pool still completes jobs without us */
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		while (!pool->stop && !(job = find_job(pool)))
			pthread_cond_wait(&pool->work, &pool->lock);
		if (pool->stop)
			break;
		job->refs++;
		pthread_mutex_unlock(&pool->lock);
		run_groups(exec, job);
		pthread_mutex_lock(&pool->lock);
		if (--job->refs == 0)
			pthread_cond_broadcast(&pool->idle);
	}
	pthread_mutex_unlock(&pool->lock);
	aql_wg_exec_destroy(exec);
	return NULL;
}

aql_status aql_pool_create(uint32_t workers, uint32_t max_workitems, struct aql_pool **out)
{
	struct aql_pool *pool = calloc(1, sizeof(*pool));
	char name[16];
	int err;

	if (!pool || !(pool->threads = calloc(workers ? workers : 1, sizeof(pthread_t)))) {
		free(pool);
		return aql_fail(AQL_ERR_NOMEM, "worker pool: no memory for %u workers", workers);
	}
	pthread_mutex_init(&pool->lock, NULL);
	pthread_cond_init(&pool->work, NULL);
	pthread_cond_init(&pool->idle, NULL);
	pool->max_workitems = max_workitems;
	for (; pool->n < workers; pool->n++) {
		err = pthread_create(&pool->threads[pool->n], NULL, worker_main, pool);
		if (err) {
			aql_pool_destroy(pool);
			return aql_fail_errno(AQL_ERR_SYSTEM, err, "worker pool: starting worker %u of %u",
					      pool->n, workers);
		}
		snprintf(name, sizeof(name), "aql-worker%u", pool->n);
		pthread_setname_np(pool->threads[pool->n], name);
	}
	*out = pool;
	return AQL_OK;
}

void aql_pool_destroy(struct aql_pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->stop = 1;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);
	for (uint32_t i = 0; i < pool->n; i++)
		pthread_join(pool->threads[i], NULL);
	pthread_cond_destroy(&pool->idle);
	pthread_cond_destroy(&pool->work);
	pthread_mutex_destroy(&pool->lock);
	free(pool->threads);
	free(pool);
}

int aql_pool_run(struct aql_pool *pool, struct aql_wg_exec *exec, struct aql_job *job)
{
	struct aql_job **pp;

	pthread_mutex_lock(&pool->lock);
	job->link = pool->jobs;
	pool->jobs = job;
	pthread_cond_broadcast(&pool->work);
	pthread_mutex_unlock(&pool->lock);

	run_groups(exec, job);

	/* Every group is handed out; wait for the workers still running one. */
	pthread_mutex_lock(&pool->lock);
	while (job->refs)
		pthread_cond_wait(&pool->idle, &pool->lock);
	for (pp = &pool->jobs; *pp != job; pp = &(*pp)->link)
		;
	*pp = job->link;
	pthread_mutex_unlock(&pool->lock);
	return job->fault ? -1 : 0;
}
