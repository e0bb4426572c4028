/* SPDX-License-Identifier: MIT */
/*
 * Channels and printf: while the kernel runs, the first work-item of each
 * work-group sends a typed message (struct progress) and a printf record
 * over one channel. A serve thread drains the channel: printf records go
 * to the printf service (formatted on the host, to stdout), the others to
 * on_progress(). Usage: progress [progress.so]; exits 0 when every
 * group's message arrived with the right value and every result is right.
 */
#include <stdio.h>
#include <string.h>
#include <aql/aql.h>
#include "progress.h"

#define CHECK(call)                                                            \
	do {                                                                   \
		if ((call) != AQL_OK) {                                        \
			fprintf(stderr, "progress: %s: %s\n", #call,           \
				aql_error_message());                          \
			return 1;                                              \
		}                                                              \
	} while (0)

enum { N = 4096, GROUP = 64, GROUPS = N / GROUP };

struct seen {
	uint32_t count;
	uint32_t bad;
	unsigned char group[GROUPS];
};

/* On the serve thread, for each typed message. */
static int on_progress(const aql_channel_msg *msg, void *ctx)
{
	struct seen *s = (struct seen *)ctx;
	struct progress p;

	if (msg->size != sizeof(p)) {
		s->bad++;
		return 0;
	}
	memcpy(&p, msg->data, sizeof(p));
	if (p.group >= GROUPS || s->group[p.group]++ ||
	    p.first != p.group * GROUP * p.group * GROUP)
		s->bad++;
	s->count++;
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const formats[] = { "group %u: work-item %u started\n" };
	const char *path = argc > 1 ? argv[1] : "progress.so";
	aql_agent *agent;
	aql_queue *q;
	aql_code_object *co;
	const aql_kernel *square;
	aql_channel *log;
	aql_printf *pf;
	aql_printf_config pcfg;
	aql_buf *data;
	aql_completion done;
	aql_launch_config cfg = { .grid = { N }, .workgroup = { GROUP } };
	struct seen seen;
	uint32_t wrong = 0;

	memset(&seen, 0, sizeof(seen));
	memset(&pcfg, 0, sizeof(pcfg));
	pcfg.formats = formats;		/* format id PROGRESS_FORMAT is formats[0] */
	pcfg.format_count = 1;
	CHECK(aql_agent_default(&agent));
	CHECK(aql_queue_create(agent, NULL, &q));
	CHECK(aql_code_object_load_file(agent, path, NULL, &co));
	CHECK(aql_code_object_kernel(co, "square", &square));

	/* The explicit pieces: a channel, a printf service attached to it,
	 * and a thread serving it. */
	CHECK(aql_channel_create(agent, NULL, &log));
	CHECK(aql_printf_create(&pcfg, &pf));
	CHECK(aql_printf_attach(pf, log));
	CHECK(aql_channel_serve_start(log, on_progress, &seen));

	CHECK(aql_buf_create(AQL_TYPE(uint32_t), N, AQL_OUT, NULL, &data));
	CHECK(AQL_LAUNCH(q, square, &cfg, &done, AQL_ARG(log), AQL_ARG(data), AQL_ARG(N)));
	CHECK(aql_completion_wait(done, AQL_TIMEOUT_INFINITE));

	/* Stopping drains what is left; then the text is flushed. */
	CHECK(aql_channel_serve_stop(log));
	CHECK(aql_printf_flush(pf));

	const uint32_t *res = aql_buf_data_const(data, uint32_t);
	for (uint32_t i = 0; i < N; i++)
		wrong += res[i] != i * i;
	printf("progress: %u of %u groups reported, %u bad messages, %u wrong results\n",
	       seen.count, GROUPS, seen.bad, wrong);

	aql_buf_destroy(data);
	aql_channel_destroy(log);
	aql_printf_destroy(pf);
	aql_queue_destroy(q);
	aql_code_object_destroy(co);
	return seen.count != GROUPS || seen.bad || wrong;
}
