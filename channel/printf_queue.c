/* SPDX-License-Identifier: MIT */
/*
 * A queue's printf channel (AQL_ARG_PRINTF(), aql/launch.h): made by the
 * first typed launch that passes it, on the queue's agent, with a printf
 * service writing to stdout and a serve thread that prints as records
 * come. Waiting for a completion of the queue drains it and flushes
 * stdout (aql_queue_flush_service()), so a kernel's text is out when the
 * wait returns; queue destroy drains it a last time and frees it.
 */
#include <stdlib.h>

#include <aql/printf.h>
#include "util/error.h"
#include "aql/queue_impl.h"
#include "channel/printf_impl.h"

struct printf_queue {
	struct aql_queue_service s;	/* first */
	aql_channel *ch;
	aql_printf *svc;
};

/* Messages of other kinds have no reader here: dropped. */
static int drop(const aql_channel_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	return 0;
}

static void pq_flush(struct aql_queue_service *s)
{
	struct printf_queue *p = (struct printf_queue *)s;

	/* Errors were counted by the service; the wait itself succeeded. */
	aql_channel_drain(p->ch, 0, drop, NULL, NULL);
	aql_printf_flush(p->svc);
}

static void pq_destroy(struct aql_queue_service *s)
{
	struct printf_queue *p = (struct printf_queue *)s;

	aql_channel_destroy(p->ch);	/* the serve thread drains what is left */
	aql_printf_destroy(p->svc);
	free(p);
}

aql_status aql_printf_queue_channel(aql_queue *queue, aql_agent *agent, aql_channel **out)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_queue_service *s = __atomic_load_n(&q->service, __ATOMIC_ACQUIRE);
	struct printf_queue *p;
	aql_status st;

	if (s) {
		*out = ((struct printf_queue *)s)->ch;
		return AQL_OK;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return aql_fail(AQL_ERR_NOMEM, "queue %llu: no memory for its printf channel",
				(unsigned long long)queue->amd->hsa.id);
	p->s = (struct aql_queue_service){ pq_flush, pq_destroy, 0 };
	st = aql_channel_create(agent, NULL, &p->ch);
	if (st == AQL_OK)
		st = aql_printf_create(NULL, &p->svc);
	if (st == AQL_OK)
		st = aql_printf_attach(p->svc, p->ch);
	if (st == AQL_OK)
		st = aql_channel_serve_start(p->ch, drop, NULL);
	if (st != AQL_OK) {
		pq_destroy(&p->s);
		return st;
	}
	/* Of two first launches racing, one channel stays; the other goes. */
	s = aql_queue_set_service(queue, &p->s);
	if (s != &p->s)
		pq_destroy(&p->s);
	*out = ((struct printf_queue *)s)->ch;
	return AQL_OK;
}
