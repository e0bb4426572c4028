/* SPDX-License-Identifier: MIT */
/*
 * fork() beside an AMD agent (issue 22, item 8): the memory the runtime
 * made for the GPU alone (a queue's ring and amd_queue_t, a signal block)
 * is not inherited (MADV_DONTFORK, as libhsakmt does), so the child's
 * copy-on-write cannot move the parent's pages under a USERPTR BO; memory
 * the program allocated from a pool listing the agent is inherited with
 * its bytes. The parent's queue and staged copies still run afterwards.
 * Not run on hardware.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aql/aql.h>

#include "helpers.h"

enum { BYTES = 1 << 16 };

/* 1 where the page holding p is mapped in this process. */
static int mapped(const void *p)
{
	uintptr_t page = (uintptr_t)p & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
	unsigned char v;

	return mincore((void *)page, 1, &v) == 0 || errno != ENOMEM;
}

/* The child's answer as exit bits; only async-signal-safe calls here. */
static int child(const aql_queue *q, const aql_signal *s, const unsigned char *pool_mem)
{
	int bits = 0;

	bits |= mapped(q->ring) << 0;
	bits |= mapped(q->amd) << 1;
	bits |= mapped(s) << 2;
	if (!mapped(pool_mem))
		bits |= 1 << 3;
	else
		for (int i = 0; i < BYTES; i++)
			if (pool_mem[i] != (unsigned char)(i * 7 + 3)) {
				bits |= 1 << 4;
				break;
			}
	return bits;
}

int main(void)
{
	static const char *const what[] = { "the ring", "the amd_queue_t", "the signal's block",
					     "pool memory is missing", "pool memory changed" };
	aql_agent *agent = NULL;
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agent_count = 1 };
	aql_queue_config qc = { .size = 64, .full_timeout_ns = TH_TIMEOUT_NS };
	unsigned char *in = NULL, *out = NULL, *plain;
	aql_completion c1, c2;
	aql_mem_pool *pool = NULL;
	aql_signal *sig = NULL;
	aql_queue *q = NULL;
	void *vram = NULL;
	int status = 0;
	pid_t pid;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	pc.agents = &agent;
	CHECK_OK(aql_mem_pool_create(&pc, &pool));
	CHECK_OK(aql_mem_alloc(pool, BYTES, 64, (void **)&in));
	CHECK_OK(aql_mem_alloc(pool, BYTES, 64, (void **)&out));
	CHECK_OK(aql_agent_mem_alloc(agent, BYTES, &vram));
	CHECK_OK(aql_queue_create(agent, &qc, &q));
	CHECK_OK(aql_signal_create(1, &sig));
	if (!in || !out || !vram || !q || !sig)
		th_stop("no pool, memory, queue or signal");
	for (int i = 0; i < BYTES; i++)
		in[i] = (unsigned char)(i * 7 + 3);
	CHECK(mapped(q->ring) && mapped(q->amd) && mapped(sig), "the parent has its pages");
	/* Memory the GPU does not reach goes through the agent's staging
	 * buffer (kfd_host_alloc), made now, before the fork. */
	if (!(plain = malloc(BYTES)))
		th_stop("no memory");
	CHECK_OK(aql_agent_copy(agent, vram, in, BYTES));
	CHECK_OK(aql_agent_copy(agent, plain, vram, BYTES));

	pid = fork();
	if (pid == 0)
		_exit(child(q, sig, in));
	CHECK(pid > 0, "fork: %s", strerror(errno));
	if (pid > 0 && waitpid(pid, &status, 0) == pid) {
		CHECK(WIFEXITED(status), "the child ended by signal %d", WTERMSIG(status));
		for (int b = 0; b < 5 && WIFEXITED(status); b++)
			CHECK(!(WEXITSTATUS(status) & 1 << b), "in the child: %s%s", what[b],
			      b < 3 ? " was inherited" : "");
	}

	/* The parent's pages and queue are as they were. */
	CHECK_OK(aql_queue_copy(q, vram, in, BYTES, NULL, 0, &c1));
	CHECK_OK(aql_queue_copy(q, out, vram, BYTES, &c1, 1, &c2));
	CHECK_OK(th_done(aql_completion_wait(c2, TH_TIMEOUT_NS)));
	CHECK(!memcmp(in, out, BYTES), "%d bytes through VRAM after the fork", BYTES);
	memset(plain, 0, BYTES);
	CHECK_OK(aql_agent_copy(agent, plain, vram, BYTES));
	CHECK(!memcmp(in, plain, BYTES), "a staged copy after the fork");
	aql_signal_store(sig, 0, AQL_RELEASE);
	CHECK(aql_signal_load(sig, AQL_ACQUIRE) == 0, "the signal after the fork");

	CHECK_OK(aql_signal_destroy(sig));
	CHECK_OK(aql_queue_destroy(q));
	aql_agent_mem_free(agent, vram);
	aql_mem_free(in);
	aql_mem_free(out);
	free(plain);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
