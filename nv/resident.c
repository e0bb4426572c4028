/* SPDX-License-Identifier: MIT */
/*
 * The host half of a resident CUDA queue (AQL_QUEUE_RESIDENT): the
 * processor kernel (nv/resident_kernel.c) linked with the device-function
 * forms of the agent's PTX kernels and a generated switch, launched once
 * on a stream of its own, and a host thread that serves it: it runs the
 * packets the processor hands back on the translating path (nv/queue.c),
 * wakes sleeping waiters of the signals it completes, wakes producers
 * waiting for room, and turns a failed stream into the queue's error.
 * nv/README.md explains the protocol.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nv/nv.h"
#include "nv/resident_abi.h"
#include "nv_resident_conf.h"
#include "util/clock.h"
#include "util/error.h"

/* The host thread's polls: a spin after activity, then sleeps to 1 ms. */
#define POLL_SPIN_NS 20000u
#define POLL_FIRST_SLEEP_NS 20000u
#define POLL_MAX_SLEEP_NS 1000000u
/* How long a destroy waits for the processor to leave. */
#define STOP_NS (60ull * 1000000000ull)
#define LINK_LOG_SIZE 4096u

/* The processor's PTX (embedded by the build; not NUL-terminated). */
#if AQL_NV_RESIDENT_PTX
extern const unsigned char nv_resident_ptx[];
extern const size_t nv_resident_ptx_size;
#else
static const unsigned char nv_resident_ptx[1];
static const size_t nv_resident_ptx_size;
#endif

struct nv_resident {
	struct nv_agent *a;
	const struct nv_driver *cu;
	struct aql_queue_impl *q;
	CUmodule module;
	CUfunction fn;
	CUstream stream;
	struct aql_res_ctl *ctl;	/* pinned, device-mapped */
	struct aql_res_kernel *kernels;	/* pinned, device-mapped */
	CUdeviceptr state;
	uint32_t blocks;
	uint64_t fallbacks;		/* atomic */
	int stop;			/* atomic: the host thread leaves */
	int failed;			/* the stream failed */
	pthread_t thread;
};

/* ---- linking ---- */

/* The switch and the kernel table being built. */
struct link_build {
	char *proc;			/* the processor's PTX, NUL-terminated */
	char *glue;			/* .extern declarations, then the switch */
	size_t len, cap;
	char *cases;
	size_t clen, ccap;
	struct aql_res_kernel *kernels;
	uint32_t count, cap_k;
	const char **names;		/* of the kernels taken, for duplicates */
	const char **ptx;		/* module texts to add */
	uint32_t nptx, cap_p;
};

static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int append(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return 0;
		if (*buf && *len + (size_t)n < *cap) {
			*len += (size_t)n;
			return 1;
		}
		size_t grown = (*cap ? *cap * 2 : 4096) + (size_t)n;
		char *p = realloc(*buf, grown);

		if (!p)
			return 0;
		*buf = p;
		*cap = grown;
	}
}

/* Whether text defines ".visible .func name(", as aql-kcc emits it. */
static int defines(const char *text, const char *name)
{
	char pat[300];

	snprintf(pat, sizeof(pat), ".visible .func %s(", name);
	return strstr(text, pat) != NULL;
}

/* Take the kernels of one PTX module that have a device-function form,
 * unless a module taken before defines a kernel of the same name: a link
 * refuses a second definition, so all of this module falls back. */
static aql_status take_module(void *user, const char *ptx, struct nv_kernel *kernels,
			      uint32_t count)
{
	struct link_build *b = user;
	int took = 0;

	for (uint32_t i = 0; i < count; i++)
		for (uint32_t j = 0; j < b->count; j++)
			if (!strcmp(b->names[j], kernels[i].name))
				return AQL_OK;
	for (uint32_t i = 0; i < count; i++) {
		char name[256];
		uint32_t flags = AQL_RES_NO_BARRIER;

		snprintf(name, sizeof(name), "%s_aql_dev_nb", kernels[i].name);
		if (!defines(ptx, name)) {
			snprintf(name, sizeof(name), "%s_aql_dev", kernels[i].name);
			flags = 0;
			if (!defines(ptx, name))
				continue;
		}
		if (b->count == b->cap_k) {
			uint32_t cap = b->cap_k ? 2 * b->cap_k : 16;
			struct aql_res_kernel *k = realloc(b->kernels, cap * sizeof(*k));
			const char **nm = k ? realloc(b->names, cap * sizeof(*nm)) : NULL;

			if (k)
				b->kernels = k;
			if (!nm)
				return aql_fail(AQL_ERR_NOMEM, "resident queue: the kernel table");
			b->names = nm;
			b->cap_k = cap;
		}
		b->kernels[b->count] = (struct aql_res_kernel){
			.object = (uint64_t)(uintptr_t)&kernels[i], .index = b->count, .flags = flags };
		b->names[b->count] = kernels[i].name;
		if (!append(&b->glue, &b->len, &b->cap,
			    ".extern .func %s(.param .b64 a0, .param .b64 a1);\n", name) ||
		    !append(&b->cases, &b->clen, &b->ccap,
			    "$C%u:\n\t{\n\t.param .b64 a0;\n\t.param .b64 a1;\n"
			    "\tst.param.b64 [a0], %%rd0;\n\tst.param.b64 [a1], %%rd1;\n"
			    "\tcall.uni %s, (a0, a1);\n\t}\n\tret;\n", b->count, name))
			return aql_fail(AQL_ERR_NOMEM, "resident queue: the switch");
		b->count++;
		took = 1;
	}
	if (took) {
		if (b->nptx == b->cap_p) {
			uint32_t cap = b->cap_p ? 2 * b->cap_p : 8;
			const char **p = realloc(b->ptx, cap * sizeof(*p));

			if (!p)
				return aql_fail(AQL_ERR_NOMEM, "resident queue: the link inputs");
			b->ptx = p;
			b->cap_p = cap;
		}
		b->ptx[b->nptx++] = ptx;
	}
	return AQL_OK;
}

/* "<directive> ..." line of text, copied into out (empty if absent). */
static void directive(const char *text, const char *name, char *out, size_t size)
{
	const char *p = strstr(text, name);
	size_t n = p ? strcspn(p, "\n") : 0;

	snprintf(out, size, "%.*s", (int)n, p ? p : "");
}

/*
 * The switch, aql_resident_call(case, kernarg, ids): case i calls the i-th
 * kernel's device function, in the processor's PTX version and target.
 */
static aql_status make_switch(struct link_build *b, const char *proc)
{
	char version[64], target[64];
	int ok;

	directive(proc, ".version", version, sizeof(version));
	directive(proc, ".target", target, sizeof(target));
	ok = append(&b->glue, &b->len, &b->cap,
		    "\n.visible .func aql_resident_call(.param .b32 c, .param .b64 k, "
		    ".param .b64 w)\n{\n\t.reg .pred %%p;\n\t.reg .b32 %%r;\n\t.reg .b64 %%rd<2>;\n"
		    "\tld.param.u32 %%r, [c];\n\tld.param.u64 %%rd0, [k];\n"
		    "\tld.param.u64 %%rd1, [w];\n");
	for (uint32_t i = 0; ok && i < b->count; i++)
		ok = append(&b->glue, &b->len, &b->cap,
			    "\tsetp.eq.u32 %%p, %%r, %u;\n\t@%%p bra $C%u;\n", i, i);
	ok = ok && append(&b->glue, &b->len, &b->cap, "\tret;\n%s}\n", b->cases ? b->cases : "");
	if (!ok)
		return aql_fail(AQL_ERR_NOMEM, "resident queue: the switch");
	/* The header goes first: rebuild the text around it. */
	char *text = NULL;
	size_t len = 0, cap = 0;

	if (!append(&text, &len, &cap, "%s\n%s\n.address_size 64\n\n%s", version, target, b->glue))
		return aql_fail(AQL_ERR_NOMEM, "resident queue: the switch");
	free(b->glue);
	b->glue = text;
	return AQL_OK;
}

static void build_free(struct link_build *b)
{
	free(b->proc);
	free(b->glue);
	free(b->cases);
	free(b->kernels);
	free(b->names);
	free(b->ptx);
}

/* Link the processor, the modules' PTX and the switch; load the result. */
static aql_status link_load(struct nv_resident *r, struct link_build *b)
{
	char *log = calloc(1, LINK_LOG_SIZE);
	int options[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *values[] = { log, (void *)(uintptr_t)LINK_LOG_SIZE };
	CUlinkState link = NULL;
	const char *call = "cuLinkCreate";
	void *image = NULL;
	size_t size = 0;
	aql_status st = AQL_OK;
	CUresult res;

	if (!log)
		return aql_fail(AQL_ERR_NOMEM, "resident queue: the link log");
	res = r->cu->cuLinkCreate(2, options, values, &link);
	if (res == CUDA_SUCCESS) {
		call = "cuLinkAddData";
		res = r->cu->cuLinkAddData(link, CU_JIT_INPUT_PTX, b->proc, strlen(b->proc) + 1,
					   "aql_resident", 0, NULL, NULL);
	}
	for (uint32_t i = 0; res == CUDA_SUCCESS && i < b->nptx; i++)
		res = r->cu->cuLinkAddData(link, CU_JIT_INPUT_PTX, (void *)b->ptx[i],
					   strlen(b->ptx[i]) + 1, "module", 0, NULL, NULL);
	if (res == CUDA_SUCCESS)
		res = r->cu->cuLinkAddData(link, CU_JIT_INPUT_PTX, b->glue, strlen(b->glue) + 1,
					   "aql_resident_switch", 0, NULL, NULL);
	if (res == CUDA_SUCCESS) {
		call = "cuLinkComplete";
		res = r->cu->cuLinkComplete(link, &image, &size);
	}
	/* The image is the link state's: loaded before it is destroyed. */
	if (res == CUDA_SUCCESS) {
		call = "cuModuleLoadDataEx";
		res = r->cu->cuModuleLoadDataEx(&r->module, image, 0, NULL, NULL);
	}
	if (res == CUDA_SUCCESS) {
		call = "cuModuleGetFunction";
		res = r->cu->cuModuleGetFunction(&r->fn, r->module, "aql_resident_processor");
	}
	if (res != CUDA_SUCCESS) {
		log[LINK_LOG_SIZE - 1] = 0;
		st = nv_fail(res, call, "resident queue %llu: linking its processor with %u "
			     "kernel(s)%s%s", (unsigned long long)r->q->pub.amd->hsa.id, b->count,
			     log[0] ? ": " : "", log);
	}
	if (link)
		r->cu->cuLinkDestroy(link);
	free(log);
	return st;
}

/* ---- the host thread ---- */

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

/* Wake the sleeping waiters of the signals the processor pushed. */
static int drain_wakes(struct nv_resident *r)
{
	uint64_t head = r->ctl->wake_head;
	uint64_t tail = __atomic_load_n(&r->ctl->wake_tail, __ATOMIC_ACQUIRE);

	if (head == tail)
		return 0;
	for (; head != tail; head++)
		aql_signal_notify_(aql_signal_from_handle(r->ctl->wake[head % AQL_RES_WAKE]));
	__atomic_store_n(&r->ctl->wake_head, head, __ATOMIC_RELEASE);
	return 1;
}

/*
 * Serve the processor until the queue is destroyed: packets it handed
 * back (run on the translating path, then returned), wake-ups, room for
 * producers, and the processor's stream, whose failure is the queue's.
 */
static void *host_main(void *arg)
{
	struct nv_resident *r = arg;
	struct aql_queue_impl *q = r->q;
	uint64_t nap = 0, spin_until = 0;
	uint64_t seen = __atomic_load_n(&q->pub.amd->read_dispatch_id, __ATOMIC_ACQUIRE);

	if (nv_enter(r->a) != AQL_OK)
		aql_queue_fail(q, AQL_ERR_DEVICE, "resident queue %llu: its host thread: %s",
			       (unsigned long long)q->pub.amd->hsa.id, aql_error_message());
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		uint64_t handed = __atomic_load_n(&r->ctl->handed, __ATOMIC_ACQUIRE);
		uint64_t read = __atomic_load_n(&q->pub.amd->read_dispatch_id, __ATOMIC_ACQUIRE);
		int busy = drain_wakes(r);
		CUresult res;

		if (handed > r->ctl->returned) {
			__atomic_fetch_add(&r->fallbacks, 1, __ATOMIC_RELAXED);
			/* A failed packet halted the queue: the processor stops. */
			if (!nv_queue_run_one(q, handed - 1, &r->stop))
				__atomic_store_n(&r->ctl->stop, 1, __ATOMIC_RELEASE);
			__atomic_store_n(&r->ctl->returned, handed, __ATOMIC_RELEASE);
			busy = 1;
		}
		if (read != seen) {
			seen = read;
			aql_queue_wake_space(q);
			busy = 1;
		}
		if (!r->failed) {
			res = r->cu->cuStreamQuery(r->stream);
			if (res != CUDA_ERROR_NOT_READY && res != CUDA_SUCCESS) {
				r->failed = 1;
				nv_queue_resident_failed(q, res);
			}
		}
		if (busy) {
			nap = 0;
			spin_until = aql_now_ns() + POLL_SPIN_NS;
		} else if (aql_now_ns() >= spin_until) {
			nap = nap ? (nap * 2 > POLL_MAX_SLEEP_NS ? POLL_MAX_SLEEP_NS : nap * 2)
				  : POLL_FIRST_SLEEP_NS;
			sleep_ns(nap);
		}
	}
	drain_wakes(r);
	return NULL;
}

/* ---- start, stop ---- */

static void release(struct nv_resident *r)
{
	if (r->module)
		r->cu->cuModuleUnload(r->module);
	if (r->stream)
		r->cu->cuStreamDestroy(r->stream);
	if (r->state)
		r->cu->cuMemFree(r->state);
	if (r->kernels)
		r->cu->cuMemFreeHost(r->kernels);
	if (r->ctl)
		r->cu->cuMemFreeHost(r->ctl);
	free(r);
}

static aql_status launch(struct nv_resident *r)
{
	struct aql_res_state st0 = { 0 };
	void *ctl = r->ctl, *params[] = { &ctl };
	CUresult res;

	st0.cur = r->q->pub.amd->read_dispatch_id;
	st0.claim = st0.cur << 32;
	res = r->cu->cuMemAlloc(&r->state, sizeof(st0));
	if (res == CUDA_SUCCESS)
		res = r->cu->cuMemcpyHtoD(r->state, &st0, sizeof(st0));
	if (res != CUDA_SUCCESS)
		return nv_fail(res, "cuMemAlloc/cuMemcpyHtoD", "resident queue %llu: its state",
			       (unsigned long long)r->q->pub.amd->hsa.id);
	r->ctl->state = r->state;
	res = r->cu->cuLaunchKernel(r->fn, r->blocks, 1, 1, AQL_RES_BLOCK, 1, 1, 0, r->stream,
				    params, NULL);
	if (res != CUDA_SUCCESS)
		return nv_fail(res, "cuLaunchKernel", "resident queue %llu: launching its "
			       "processor (%u blocks of %u threads)",
			       (unsigned long long)r->q->pub.amd->hsa.id, r->blocks, AQL_RES_BLOCK);
	return AQL_OK;
}

aql_status nv_resident_start(struct nv_agent *a, struct aql_queue_impl *q,
			     struct nv_resident **out)
{
	struct link_build b = { 0 };
	struct nv_resident *r;
	aql_queue *pub = &q->pub;
	aql_status st;
	CUresult res;
	int err;

	if (!nv_resident_ptx_size)
		return aql_fail(AQL_ERR_UNSUPPORTED, "AQL_QUEUE_RESIDENT: this libaql was built "
				"without the resident processor's PTX (no clang for nvptx64)");
	r = calloc(1, sizeof(*r));
	if (!r)
		return aql_fail(AQL_ERR_NOMEM, "resident queue: no memory");
	*r = (struct nv_resident){ .a = a, .cu = a->cu, .q = q };
	r->blocks = (q->flags >> 8) & 0xffu;
	if (!r->blocks)
		r->blocks = AQL_QUEUE_RESIDENT_DEFAULT_BLOCKS;
	/* The ring and the read index are read and written by the device. */
	st = nv_host_register(a, pub->ring, (size_t)pub->size * sizeof(aql_packet));
	if (st == AQL_OK)
		st = nv_host_register(a, pub->amd, sizeof(*pub->amd));
	if (st == AQL_OK && !(b.proc = strndup((const char *)nv_resident_ptx, nv_resident_ptx_size)))
		st = aql_fail(AQL_ERR_NOMEM, "resident queue: the processor's PTX");
	if (st == AQL_OK)
		st = nv_modules_each_ptx(a, take_module, &b);
	if (st == AQL_OK)
		st = make_switch(&b, b.proc);
	if (st != AQL_OK)
		goto fail;
	res = r->cu->cuMemHostAlloc((void **)&r->ctl, sizeof(*r->ctl),
				    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	if (res == CUDA_SUCCESS)
		res = r->cu->cuMemHostAlloc((void **)&r->kernels,
					    (b.count ? b.count : 1) * sizeof(*r->kernels),
					    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	if (res != CUDA_SUCCESS) {
		st = nv_fail(res, "cuMemHostAlloc", "resident queue %llu: its control block",
			     (unsigned long long)pub->amd->hsa.id);
		goto fail;
	}
	memset(r->ctl, 0, sizeof(*r->ctl));
	if (b.count)
		memcpy(r->kernels, b.kernels, b.count * sizeof(*r->kernels));
	r->ctl->ring = (uint64_t)(uintptr_t)pub->ring;
	r->ctl->read_index = (uint64_t)(uintptr_t)&pub->amd->read_dispatch_id;
	r->ctl->kernels = (uint64_t)(uintptr_t)r->kernels;
	r->ctl->kernel_count = b.count;
	r->ctl->mask = (uint32_t)pub->mask;
	r->ctl->handed = r->ctl->returned = pub->amd->read_dispatch_id;
	st = link_load(r, &b);
	if (st != AQL_OK)
		goto fail;
	res = r->cu->cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING);
	if (res != CUDA_SUCCESS) {
		st = nv_fail(res, "cuStreamCreate", "resident queue %llu: its stream",
			     (unsigned long long)pub->amd->hsa.id);
		goto fail;
	}
	st = launch(r);
	if (st != AQL_OK)
		goto fail;
	err = pthread_create(&r->thread, NULL, host_main, r);
	if (err) {
		st = aql_fail_errno(AQL_ERR_SYSTEM, err, "resident queue: its host thread");
		__atomic_store_n(&r->ctl->stop, 1, __ATOMIC_RELEASE);
		r->cu->cuStreamSynchronize(r->stream);
		goto fail;
	}
	build_free(&b);
	*out = r;
	return AQL_OK;
fail:
	build_free(&b);
	release(r);
	return st;
}

void nv_resident_stop(struct nv_resident *r)
{
	uint64_t deadline = aql_deadline(STOP_NS), nap = 1000;
	CUresult res = CUDA_SUCCESS;

	/* Between packets: a block checks stop before each claim, and while
	 * it waits on a barrier or on the host. */
	__atomic_store_n(&r->ctl->stop, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
	pthread_join(r->thread, NULL);
	while (!r->failed && (res = r->cu->cuStreamQuery(r->stream)) == CUDA_ERROR_NOT_READY &&
	       aql_now_ns() < deadline) {
		sleep_ns(nap);
		nap = nap * 2 > POLL_MAX_SLEEP_NS ? POLL_MAX_SLEEP_NS : nap * 2;
	}
	if (res == CUDA_ERROR_NOT_READY) {
		/* A kernel inside never returned: its SMs stay taken, and so
		 * does the memory it uses. */
		aql_queue_fail(r->q, AQL_ERR_TIMEOUT, "resident queue %llu destroyed while its "
			       "processor still ran a kernel after %llu s: its packets got -1",
			       (unsigned long long)r->q->pub.amd->hsa.id, STOP_NS / 1000000000ull);
		return;
	}
	if (res != CUDA_SUCCESS && !r->failed)
		nv_queue_resident_failed(r->q, res);
	release(r);
}

uint64_t nv_resident_fallbacks(const struct nv_resident *r)
{
	return __atomic_load_n(&r->fallbacks, __ATOMIC_RELAXED);
}
