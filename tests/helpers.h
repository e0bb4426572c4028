/* SPDX-License-Identifier: MIT */
/* Shared test helpers: checks with a closing tally, packets, kernels. */
#ifndef AQL_TESTS_HELPERS_H
#define AQL_TESTS_HELPERS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <aql/aql.h>

extern unsigned th_passed, th_failed;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			th_passed++;                                           \
		} else {                                                       \
			th_failed++;                                           \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
		}                                                              \
	} while (0)

/* CHECK that a call returned AQL_OK, printing the reason otherwise. */
#define CHECK_OK(call)                                                         \
	do {                                                                   \
		aql_status st_ = (call);                                       \
		CHECK(st_ == AQL_OK, "%s: %s", aql_status_str(st_), aql_error_message()); \
	} while (0)

/* Print "N passed, M failed" and return the exit status. */
int th_finish(void);

/*
 * How long a test waits for work to finish: long enough for a sanitizer
 * build on a loaded 2-core machine (10 s, six times that under ASan or
 * TSan), short enough to fail rather than hang. Meson's own limits for
 * the tests are above it.
 */
uint64_t th_timeout_ns(void);
#define TH_TIMEOUT_NS th_timeout_ns()

/*
 * Pass st through, unless it is AQL_ERR_TIMEOUT: then the work waited for
 * may still be running, and code, kernargs or buffers it uses must stay
 * as they are. The test fails and the process ends at once with _exit(),
 * unloading and freeing nothing.
 */
aql_status th_done(aql_status st);

/* Fail and end the test at once, as th_done() does on a timeout. */
void th_stop(const char *why) __attribute__((noreturn));

/*
 * A symbol of the KFD emulation that aql loaded (AQL_KFD_SYS, a test
 * extra of tests/kfd_emu/kfdemu.h), or th_stop(): a run that names no
 * emulation must not pass.
 */
void *th_kfdemu_sym(const char *name);

/* CHECK_OK for a wait on work in flight: a timeout ends the test (th_done). */
#define CHECK_DONE(call) CHECK_OK(th_done(call))

/* The default CPU agent, or exit(1). */
aql_agent *th_agent(void);

/* A queue on the default agent; errors are recorded for th_last_error. */
aql_queue *th_queue(uint32_t size, enum aql_queue_type type, uint32_t flags);

/*
 * The agent a suite's typed launches, buffers, channels and printf run on:
 * with AQL_TEST_AGENT=nvidia, NVIDIA agent 0 (the emulated driver of
 * tests/cuda_emu under meson, the real one in tests/hil); with
 * AQL_TEST_AGENT=amd, AMD agent 0 (the KFD emulation that AQL_KFD_SYS
 * names under meson); opened once and kept until exit; otherwise the default CPU
 * agent. exit(1) with the reason when the GPU agent cannot be opened:
 * that run must not pass.
 */
aql_agent *th_test_agent(void);

/* Whether th_test_agent() is a GPU agent, and its kind. */
int th_test_gpu(void);
enum aql_agent_kind th_test_kind(void);

/* As th_queue(), on th_test_agent(); with AQL_TEST_RESIDENT=1, a
 * resident queue (AQL_QUEUE_RESIDENT, 2 blocks: NVIDIA agents only). */
aql_queue *th_test_queue(uint32_t size, enum aql_queue_type type, uint32_t flags);

/*
 * The kernels for th_test_agent(), loaded on it: host_path (a host code
 * object) on the CPU agent, gpu_path (PTX, or an AMDGPU code object for
 * the emulated GPU's processor) on a GPU agent. exit(1) when the agent's
 * file is NULL or does not load.
 */
aql_code_object *th_load_kernels(const char *host_path, const char *gpu_path);

/* Say that part of a suite does not run on th_test_agent(), and why. */
void th_skip(const char *what, const char *why);

/* What the error callback of th_queue() queues last received. */
extern char th_last_error[256];
extern unsigned th_error_calls;

/* A 1- to 3-D dispatch; dims taken from how many of grid[] exceed 0. */
aql_dispatch_packet th_dispatch(const aql_host_kernel_descriptor *kd, const void *kernarg,
				unsigned dims, const uint32_t grid[3], const uint16_t wg[3],
				aql_signal *completion, int barrier);

/* A one-work-item dispatch of kd. */
aql_dispatch_packet th_dispatch1(const aql_host_kernel_descriptor *kd, const void *kernarg,
				 aql_signal *completion);

/* Submit; a failure is recorded with its reason. Returns the status. */
aql_status th_submit(aql_queue *q, const void *packet);

/*
 * Publish n packets at once: n slots reserved, stored last to first (the
 * first header, which the processor waits on, last), one doorbell. For a
 * test one of whose packets stops the queue: the processor meets none of
 * them before all are in, so the stop cannot turn away those behind it,
 * however slowly the test runs. A failure is recorded as th_submit's is.
 */
aql_status th_submit_all(aql_queue *q, const aql_packet *packets, uint32_t n);

/* Wait until signal < 1 and return its value (negative: packet failed).
 * A timeout ends the test (th_done). */
int64_t th_wait_done(aql_signal *signal);

/*
 * Wait (up to TH_TIMEOUT_NS) for the read index to reach id: the processor
 * advances it just after the completion signal, so a test that saw the
 * signal must still wait for it. Returns the index; a timeout ends the
 * test (th_done).
 */
uint64_t th_wait_read_index(aql_queue *q, uint64_t id);

/* A signal with an initial value, or exit(1). */
aql_signal *th_signal(int64_t initial);

/* A kernel that does nothing, for ordering and throughput tests. */
extern const aql_host_kernel_descriptor th_empty_kd;

/* A kernel whose kernarg is { uint64_t *counter; } and that increments it. */
struct th_count_args {
	uint64_t *counter;
};
extern const aql_host_kernel_descriptor th_count_kd;

/* Sleep for ms milliseconds. */
void th_sleep_ms(unsigned ms);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t th_now_ns(void);

/* Kernel name of co, or exit(1). */
const aql_kernel *th_kernel(aql_code_object *co, const char *name);

/* A zeroed AQL_INOUT buffer of n elements of type, or exit(1). */
aql_buf *th_buf(const aql_type *type, uint64_t n);

/*
 * A typed launch of saxpy (tests/kernels, the code object at path) on a
 * queue of its own on agent, y = 2x + 1 over 1000 floats, checked; where
 * names the run in a failure. Loads, buffers and queue are freed after.
 */
void th_check_saxpy(aql_agent *agent, const char *path, const char *where);

/* A barrier packet on q that holds everything behind it until
 * th_gate_open() of the signal returned. */
aql_signal *th_gate_close(aql_queue *q);
void th_gate_open(aql_signal *gate);

/*
 * aql_agent_mem_alloc() of agent comes zeroed, and bytes go host -> agent
 * memory -> agent memory -> host with aql_agent_copy(), checked; where
 * names the run in a failure.
 */
void th_check_agent_copies(aql_agent *agent, const char *where);

/* A packet header: barrier bit set, system-scope fences both sides. */
uint16_t th_header(enum aql_packet_type type);

/* A barrier-AND on dep (NULL: none), and an AMD BARRIER_VALUE packet that
 * waits for (sig & mask) cond value; each completes done. */
aql_packet th_barrier_and(aql_signal *dep, aql_signal *done);
aql_packet th_barrier_value(aql_signal *sig, enum aql_signal_condition cond, int64_t value,
			    int64_t mask, aql_signal *done);

/* Memory of agent holding n floats of value v, or the test stops. */
float *th_device_floats(aql_agent *agent, uint32_t n, float v);

/* Whether every one of n floats of agent's memory at dev equals v;
 * prints the first and last if not. */
int th_device_all(aql_agent *agent, const float *dev, uint32_t n, float v);

/* The whole file at path (malloc'd; *size set), or exit(1). */
void *th_read_file(const char *path, size_t *size);

/* Whether the thread's last error message contains needle; prints it if not. */
int th_error_has(const char *needle);

#endif
