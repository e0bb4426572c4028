/* SPDX-License-Identifier: MIT */
/*
 * The emulated CUDA driver's modules. PTX is parsed for its entries and
 * parameter layouts (aql_ptx_parse), checked with the toolkit's nvJitLink
 * when it is installed (ref §6.3); a cubin's are read by the loader's
 * cubin reader, and a fatbin gives one of its entries as the driver picks
 * it. Each entry is bound to the host build of the same single-source
 * kernel, found through AQL_CUDA_EMU_KERNELS (colon-separated host code
 * object paths).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"
#include "loader/nv_impl.h"

#define NV_DECLARE_(name, ret, params) ret name params;
NV_DRIVER_FUNCS(NV_DECLARE_)
#undef NV_DECLARE_

struct CUfunc_st {
	struct CUmod_st *mod;
	const aql_ptx_entry *entry;
	uint32_t ptx_version;		/* of the PTX that defines it */
	const aql_kernel *kernel;	/* host build */
	uint32_t max_threads;
	uint32_t dyn_max;		/* MAX_DYNAMIC_SHARED_SIZE_BYTES; under emu.lock */
};

/*
 * One PTX text of a module and the host build that runs its entries (NULL
 * when it has none). A module loaded from PTX, a cubin or a fatbin has one
 * part; one from cuLinkComplete's image has a part per input.
 */
struct part {
	aql_ptx_module *ptx;
	aql_code_object *co;
};

struct CUmod_st {
	struct CUctx_st *ctx;
	struct part *parts;
	uint32_t nparts;
	struct emu_table *table;	/* a linked switch's, or NULL */
	uint32_t count;
	struct CUfunc_st *fns;
	_Atomic long pending;		/* launches queued, not done */
	struct CUmod_st *next;		/* live modules */
};

static struct CUmod_st *modules;	/* under emu.lock */

/* ---- nvJitLink ---------------------------------------------------------- */

/* The toolkit's PTX linker (nvJitLink.h, CUDA 13): handles and results. */
typedef struct nvjl *nvjl_handle;
struct nvjitlink {
	int (*create)(nvjl_handle *h, uint32_t n, const char **options);
	int (*destroy)(nvjl_handle *h);
	int (*add_data)(nvjl_handle h, int type, const void *data, size_t size, const char *name);
	int (*complete)(nvjl_handle h);
	int (*log_size)(nvjl_handle h, size_t *size);
	int (*log)(nvjl_handle h, char *log);
};
#define NVJITLINK_INPUT_PTX 2

static struct nvjitlink jl;
static int jl_found;
static pthread_once_t jl_once = PTHREAD_ONCE_INIT;

static void *jl_open(void)
{
	const char *home = getenv("CUDA_HOME");
	char path[4096];
	void *h;

	if (home && *home) {
		snprintf(path, sizeof(path), "%s/lib64/libnvJitLink.so.13", home);
		if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
			return h;
	}
	if ((h = dlopen("/usr/local/cuda/lib64/libnvJitLink.so.13", RTLD_NOW | RTLD_LOCAL)))
		return h;
	return dlopen("libnvJitLink.so.13", RTLD_NOW | RTLD_LOCAL);
}

static void jl_load(void)
{
	void *h = jl_open();

	if (!h)
		return;
	*(void **)&jl.create = dlsym(h, "nvJitLinkCreate");
	*(void **)&jl.destroy = dlsym(h, "nvJitLinkDestroy");
	*(void **)&jl.add_data = dlsym(h, "nvJitLinkAddData");
	*(void **)&jl.complete = dlsym(h, "nvJitLinkComplete");
	*(void **)&jl.log_size = dlsym(h, "nvJitLinkGetErrorLogSize");
	*(void **)&jl.log = dlsym(h, "nvJitLinkGetErrorLog");
	jl_found = jl.create && jl.destroy && jl.add_data && jl.complete && jl.log_size && jl.log;
}

/*
 * Link n PTX texts for sm_90 as the driver's JIT (one text) or linker
 * would. Returns 0 if they link or no toolkit is installed; -1 with *log
 * (malloc'd) holding the linker's error log if they do not.
 */
static int jit_link(uint32_t n, const char *const *texts, const size_t *sizes, char **log)
{
	const char *opts[] = { "-arch=sm_90" };
	nvjl_handle h = NULL;
	int bad = 0;

	pthread_once(&jl_once, jl_load);
	if (!jl_found)
		return 0;
	atomic_fetch_add(&emu.stats.ptx_jit_links, 1);
	if (jl.create(&h, 1, opts) != 0)
		return 0;
	for (uint32_t i = 0; i < n && !bad; i++)
		bad = jl.add_data(h, NVJITLINK_INPUT_PTX, texts[i], sizes[i], "module.ptx") != 0;
	bad = bad || jl.complete(h) != 0;
	if (bad) {
		size_t n = 0;

		if (jl.log_size(h, &n) == 0 && (*log = malloc(n + 1))) {
			if (jl.log(h, *log) != 0)
				**log = 0;
			(*log)[n] = 0;
		}
	}
	jl.destroy(&h);
	return bad ? -1 : 0;
}

/* ---- JIT options -------------------------------------------------------- */

struct jit_logs {
	char *error;
	size_t error_size;
	int error_size_index;
	char *info;
	size_t info_size;
	int info_size_index;
};

static CUresult jit_options(unsigned n, const int *options, void **values, struct jit_logs *l)
{
	memset(l, 0, sizeof(*l));
	l->error_size_index = l->info_size_index = -1;
	if (n && (!options || !values))
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		switch (options[i]) {
		case CU_JIT_ERROR_LOG_BUFFER:
			l->error = values[i];
			break;
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
			l->error_size = (unsigned)(uintptr_t)values[i];
			l->error_size_index = (int)i;
			break;
		case CU_JIT_INFO_LOG_BUFFER:
			l->info = values[i];
			break;
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
			l->info_size = (unsigned)(uintptr_t)values[i];
			l->info_size_index = (int)i;
			break;
		default:
			/* CUjit_option has fewer than 40 values in CUDA 13. */
			if (options[i] < 0 || options[i] >= 40)
				return CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	return CUDA_SUCCESS;
}

/* Copy msg into a log buffer, truncated and NUL-terminated, and write the
 * bytes used back into the size option's value, as the driver does. */
static void log_put(char *buf, size_t size, int size_index, void **values, const char *msg)
{
	size_t n;

	if (!buf || size == 0)
		return;
	n = strlen(msg);
	if (n > size - 1)
		n = size - 1;
	memcpy(buf, msg, n);
	buf[n] = 0;
	if (size_index >= 0)
		values[size_index] = (void *)(uintptr_t)n;
}

/* ---- Modules ------------------------------------------------------------ */

/* The first host code object in AQL_CUDA_EMU_KERNELS that defines every
 * entry of the module, loaded on the emulation's CPU agent. */
static aql_code_object *find_host_build(const aql_ptx_module *ptx, const aql_load_options *opts)
{
	const char *list = getenv("AQL_CUDA_EMU_KERNELS");
	char path[4096];

	while (list && *list) {
		const char *end = strchr(list, ':');
		size_t n = end ? (size_t)(end - list) : strlen(list);
		aql_code_object *co;

		if (n > 0 && n < sizeof(path)) {
			memcpy(path, list, n);
			path[n] = 0;
			if (aql_code_object_load_file(emu.agent, path, opts, &co) == AQL_OK) {
				uint32_t i;
				const aql_kernel *k;

				for (i = 0; i < ptx->entry_count; i++)
					if (aql_code_object_kernel(co, ptx->entries[i].name, &k) != AQL_OK)
						break;
				if (i == ptx->entry_count)
					return co;
				aql_code_object_destroy(co);
			}
		}
		list = end ? end + 1 : list + n;
	}
	return NULL;
}

static int is_cubin(const unsigned char *p)
{
	/* ELF (an image that starts so is a whole ELF header, as the driver
	 * assumes), e_machine EM_CUDA (190) at offset 18, little endian.
	 * Byte by byte, so short PTX text is never read past its NUL. */
	return p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[18] == 190 &&
	       p[19] == 0;
}

static int is_fatbin(const unsigned char *p)
{
	return p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba;
}

static uint64_t rd64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * The bytes an ELF image spans, from its headers: the driver is given no
 * size. The section headers come last in what ptxas and nvcc write; the
 * sections and program headers are counted too.
 */
static size_t elf_extent(const unsigned char *p)
{
	uint64_t shoff = rd64(p + 40), phoff = rd64(p + 32), end;
	uint32_t shnum = p[60] | p[61] << 8, phnum = p[56] | p[57] << 8;

	end = shoff + (uint64_t)shnum * 64;
	if (phoff + (uint64_t)phnum * 56 > end)
		end = phoff + (uint64_t)phnum * 56;
	for (uint32_t i = 0; i < shnum; i++) {
		const unsigned char *h = p + shoff + (uint64_t)i * 64;

		if ((h[4] | h[5] << 8 | h[6] << 16 | (uint32_t)h[7] << 24) != 8 /* SHT_NOBITS */ &&
		    rd64(h + 24) + rd64(h + 32) > end)
			end = rd64(h + 24) + rd64(h + 32);
	}
	return (size_t)end;
}

/* What a failed load writes into the JIT error log. */
static CUresult refuse(const struct jit_logs *l, void **values, CUresult r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_put(l->error, l->error_size, l->error_size_index, values, msg);
	return r;
}

/* PTX text of size bytes: its entries, as the driver's JIT would take it. */
static CUresult from_ptx(const char *text, size_t size, const struct jit_logs *l, void **values,
			 aql_ptx_module **out)
{
	aql_ptx_module *ptx = NULL;
	char *jlog = NULL;
	uint32_t v;

	if (aql_ptx_parse(text, size, &ptx) != AQL_OK)
		return refuse(l, values, CUDA_ERROR_INVALID_PTX, "aql cuda emulation: %s",
			      aql_error_message());
	/* PTX newer than the driver's ISA: 9.0 for CUDA 13.0, 7.8 for 11.8
	 * (ref §3.7). */
	v = ptx->version[0] * 10 + ptx->version[1];
	if (v > (emu.mode == EMU_OLD ? 78u : 90u)) {
		aql_ptx_free(ptx);
		return refuse(l, values, CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
			      "aql cuda emulation: PTX ISA %u.%u is newer than this driver's",
			      v / 10, v % 10);
	}
	if (jit_link(1, &text, &size, &jlog) != 0) {
		refuse(l, values, CUDA_ERROR_INVALID_PTX, "%s", jlog ? jlog : "nvJitLink failed");
		free(jlog);
		aql_ptx_free(ptx);
		return CUDA_ERROR_INVALID_PTX;
	}
	*out = ptx;
	return CUDA_SUCCESS;
}

/*
 * Whether code built for sm runs on the device: the same major version and
 * a minor version no newer than the device's (CUDA C Programming Guide,
 * "Binary Compatibility"; LLVM offload's CUDA plugin checks the same).
 */
static int runs_here(uint32_t sm)
{
	return sm / 10 == EMU_SM / 10 && sm % 10 <= EMU_SM % 10;
}

/* A cubin of size bytes: its entries, if it was built for this device. */
static CUresult from_cubin(const unsigned char *image, size_t size, const struct jit_logs *l,
			   void **values, aql_ptx_module **out)
{
	uint32_t sm = 0;

	if (aql_cubin_read(image, size, &sm, out, NULL) != AQL_OK)
		return refuse(l, values, CUDA_ERROR_INVALID_IMAGE, "aql cuda emulation: %s",
			      aql_error_message());
	/* A cubin for another architecture: "no kernel image is available
	 * that is suitable for the device" (cuda.h, CUresult), which
	 * cuModuleLoadDataEx returns. */
	if (!runs_here(sm)) {
		aql_ptx_free(*out);
		*out = NULL;
		return refuse(l, values, CUDA_ERROR_NO_BINARY_FOR_GPU,
			      "aql cuda emulation: a cubin for sm_%u does not run on this sm_%u device",
			      sm, EMU_SM);
	}
	return CUDA_SUCCESS;
}

/*
 * A fatbin: its best cubin for the device (the newest that runs here),
 * else its newest PTX no newer than the device, JIT-compiled; else
 * CUDA_ERROR_NO_BINARY_FOR_GPU (cuModuleLoadFatBinary's reference).
 */
static CUresult from_fatbin(const unsigned char *image, const struct jit_logs *l, void **values,
			    aql_ptx_module **out)
{
	struct aql_fatbin_entry *es = malloc(AQL_FATBIN_MAX_ENTRIES * sizeof(*es));
	const struct aql_fatbin_entry *best = NULL;
	size_t size = (image[6] | image[7] << 8) + rd64(image + 8), used, n;
	const uint8_t *bytes;
	uint8_t *owned = NULL;
	uint32_t count;
	CUresult r;

	if (!es)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (aql_fatbin_entries(image, size, es, AQL_FATBIN_MAX_ENTRIES, &count, &used) != AQL_OK) {
		free(es);
		return refuse(l, values, CUDA_ERROR_INVALID_IMAGE, "aql cuda emulation: %s",
			      aql_error_message());
	}
	for (uint32_t i = 0; i < count; i++)
		if (es[i].kind == AQL_FATBIN_CUBIN && runs_here(es[i].sm) &&
		    (!best || es[i].sm > best->sm))
			best = &es[i];
	for (uint32_t i = 0; !best && i < count; i++)
		if (es[i].kind == AQL_FATBIN_PTX && es[i].sm <= EMU_SM)
			best = &es[i];
	for (uint32_t i = 0; best && best->kind == AQL_FATBIN_PTX && i < count; i++)
		if (es[i].kind == AQL_FATBIN_PTX && es[i].sm <= EMU_SM && es[i].sm > best->sm)
			best = &es[i];
	if (!best) {
		free(es);
		return refuse(l, values, CUDA_ERROR_NO_BINARY_FOR_GPU,
			      "aql cuda emulation: the fatbin holds no cubin or PTX for this sm_%u device",
			      EMU_SM);
	}
	if (best->compression == AQL_FATBIN_LZ4) {
		free(es);
		return refuse(l, values, CUDA_ERROR_INVALID_IMAGE,
			      "aql cuda emulation: LZ4-compressed fatbin entries are not emulated");
	}
	if (aql_fatbin_payload(best, &bytes, &n, &owned) != AQL_OK) {
		free(es);
		return refuse(l, values, CUDA_ERROR_INVALID_IMAGE, "aql cuda emulation: %s",
			      aql_error_message());
	}
	if (best->kind == AQL_FATBIN_CUBIN)
		r = from_cubin(bytes, n, l, values, out);
	else
		r = from_ptx((const char *)bytes, strnlen((const char *)bytes, n), l, values, out);
	free(owned);
	free(es);
	return r;
}

/* ---- The linker -------------------------------------------------------- */

/*
 * cuLinkComplete's image here: not a cubin but the inputs' PTX, each
 * checked as the driver's JIT would check it, so that a module loaded
 * from it binds each input's entries to that input's host build. The
 * magic cannot start PTX text, an ELF header or a fatbin.
 */
#define LINK_MAGIC "\x01" "aqlemu-linked"
#define LINK_MAGIC_SIZE 14u
#define LINK_MAX_INPUTS 64u

struct CUlinkState_st {
	struct jit_logs logs;
	void **values;			/* cuLinkCreate's, for the logs */
	char *texts[LINK_MAX_INPUTS];
	size_t sizes[LINK_MAX_INPUTS];
	uint32_t n;
	unsigned char *image;		/* cuLinkComplete's, owned */
	struct CUlinkState_st *next;
};

static struct CUlinkState_st *links;	/* live states, under emu.lock */

static int is_linked(const unsigned char *p)
{
	return !memcmp(p, LINK_MAGIC, LINK_MAGIC_SIZE);
}

CUresult cuLinkCreate(unsigned int n, int *options, void **values, CUlinkState *state)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUlinkState_st *ls;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = jit_options(n, options, values, &ls->logs);
	if (r != CUDA_SUCCESS) {
		free(ls);
		return r;
	}
	/* "optionValues must remain valid for the life of the CUlinkState
	 * if output options are used" (cuLinkCreate, cuda.h 13.0). */
	ls->values = values;
	EMU_LIST_PUSH(links, ls);
	*state = ls;
	return CUDA_SUCCESS;
}

static struct CUlinkState_st *link_find(CUlinkState state)
{
	struct CUlinkState_st *ls;

	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(links, state, ls);
	pthread_mutex_unlock(&emu.lock);
	return ls;
}

CUresult cuLinkAddData(CUlinkState state, int type, void *data, size_t size, const char *name,
		       unsigned int n, int *options, void **values)
{
	EMU_ENTRY();
	struct CUlinkState_st *ls;
	struct jit_logs logs;
	aql_ptx_module *ptx = NULL;
	CUresult r = emu_gate();

	(void)name;
	if (r != CUDA_SUCCESS)
		return r;
	ls = link_find(state);
	if (!ls)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!data || !size || type < 0 || type >= CU_JIT_NUM_INPUT_TYPES)
		return CUDA_ERROR_INVALID_VALUE;
	r = jit_options(n, options, values, &logs);
	if (r != CUDA_SUCCESS)
		return r;
	/* Only PTX here; the driver also takes cubins, fatbins and objects. */
	if (type != CU_JIT_INPUT_PTX)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* "PTX must be NULL-terminated" (cuLinkAddData, cuda.h 13.0). */
	if (memchr(data, 0, size) == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (ls->n == LINK_MAX_INPUTS || ls->image)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* Each input is checked as cuModuleLoadDataEx checks PTX, but linked
	 * only at cuLinkComplete: its externs may be defined by the others. */
	if (aql_ptx_parse(data, strlen(data), &ptx) != AQL_OK) {
		log_put(ls->logs.error, ls->logs.error_size, ls->logs.error_size_index, ls->values,
			aql_error_message());
		return CUDA_ERROR_INVALID_PTX;
	}
	if (ptx->version[0] * 10 + ptx->version[1] > (emu.mode == EMU_OLD ? 78u : 90u)) {
		aql_ptx_free(ptx);
		return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
	}
	aql_ptx_free(ptx);
	ls->texts[ls->n] = strdup(data);
	if (!ls->texts[ls->n])
		return CUDA_ERROR_OUT_OF_MEMORY;
	ls->n++;
	return CUDA_SUCCESS;
}

/* Calls f(name, user) for each ".<kind> .func NAME" of text, kind being
 * "extern" or "visible"; stops when f returns non-zero, and returns that. */
static int each_func(const char *text, const char *kind, int (*f)(const char *, size_t, void *),
		     void *user)
{
	char pat[32];
	const char *p = text;
	int r;

	snprintf(pat, sizeof(pat), ".%s .func", kind);
	while ((p = strstr(p, pat))) {
		const char *q = p + strlen(pat);
		size_t len;

		/* A return value, "(.param ...) NAME", may come first. */
		q += strspn(q, " \t\n");
		if (*q == '(')
			q = strchr(q, ')') ? strchr(q, ')') + 1 : q;
		q += strspn(q, " \t\n");
		len = strcspn(q, " \t\n(;");
		if ((r = f(q, len, user)))
			return r;
		p = q + len;
	}
	return 0;
}

struct func_query {
	const char *name;
	size_t len;
};

static int same_name(const char *name, size_t len, void *user)
{
	const struct func_query *q = user;

	return len == q->len && !memcmp(name, q->name, len);
}

struct undefined {
	struct CUlinkState_st *ls;
	char missing[128];
};

/* An extern function that no input defines: the link fails on it. */
static int check_defined(const char *name, size_t len, void *user)
{
	struct undefined *u = user;
	struct func_query q = { name, len };

	for (uint32_t i = 0; i < u->ls->n; i++)
		if (each_func(u->ls->texts[i], "visible", same_name, &q))
			return 0;
	snprintf(u->missing, sizeof(u->missing), "%.*s", (int)len, name);
	return 1;
}

CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size)
{
	EMU_ENTRY();
	struct CUlinkState_st *ls;
	struct undefined u;
	size_t total = LINK_MAGIC_SIZE + 4;
	unsigned char *p;
	char msg[256], *jlog = NULL;
	CUresult r = emu_gate();

	if (r != CUDA_SUCCESS)
		return r;
	ls = link_find(state);
	if (!ls)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!cubin)
		return CUDA_ERROR_INVALID_VALUE;
	u.ls = ls;
	for (uint32_t i = 0; i < ls->n; i++) {
		if (each_func(ls->texts[i], "extern", check_defined, &u)) {
			/* The linker's refusal; cuda.h 13.0 lists no code for
			 * it, the driver answers an unresolved symbol so. */
			snprintf(msg, sizeof(msg), "aql cuda emulation: undefined reference to '%s'",
				 u.missing);
			log_put(ls->logs.error, ls->logs.error_size, ls->logs.error_size_index,
				ls->values, msg);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		total += strlen(ls->texts[i]) + 1;
	}
	/* With the toolkit here, its linker checks the inputs together. */
	for (uint32_t i = 0; i < ls->n; i++)
		ls->sizes[i] = strlen(ls->texts[i]);
	if (jit_link(ls->n, (const char *const *)ls->texts, ls->sizes, &jlog) != 0) {
		log_put(ls->logs.error, ls->logs.error_size, ls->logs.error_size_index, ls->values,
			jlog ? jlog : "nvJitLink failed");
		free(jlog);
		return CUDA_ERROR_INVALID_IMAGE;
	}
	free(ls->image);
	ls->image = p = malloc(total);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	memcpy(p, LINK_MAGIC, LINK_MAGIC_SIZE);
	memcpy(p + LINK_MAGIC_SIZE, &ls->n, 4);
	p += LINK_MAGIC_SIZE + 4;
	for (uint32_t i = 0; i < ls->n; i++) {
		size_t len = strlen(ls->texts[i]) + 1;

		memcpy(p, ls->texts[i], len);
		p += len;
	}
	/* The image is the state's: "it should be loaded before state is
	 * destroyed" (cuLinkComplete, cuda.h 13.0). */
	*cubin = ls->image;
	if (size)
		*size = total;
	log_put(ls->logs.info, ls->logs.info_size, ls->logs.info_size_index, ls->values, "");
	return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState state)
{
	EMU_ENTRY();
	struct CUlinkState_st *ls;
	CUresult r = emu_gate();

	if (r != CUDA_SUCCESS)
		return r;
	EMU_LIST_TAKE(links, state, ls);
	if (!ls)
		return CUDA_ERROR_INVALID_HANDLE;
	for (uint32_t i = 0; i < ls->n; i++)
		free(ls->texts[i]);
	free(ls->image);
	free(ls);
	return CUDA_SUCCESS;
}

/* ---- Modules, continued ------------------------------------------------- */

/*
 * The host builds' stand-in for a linked switch: an input without entries
 * that calls .extern functions is glue, and case i of its switch is its
 * i-th extern function. The host build of every input is loaded with
 * aql_resident_table_ bound to this table, the host builds of those
 * functions (exported by the host code objects of the inputs that define
 * them) in that order.
 */
struct emu_table {
	uint64_t count;
	uint64_t fn[];
};

struct table_fill {
	struct CUmod_st *m;
	struct emu_table *t;
	uint32_t cap;
	char missing[128];
};

static int table_add(const char *name, size_t len, void *user)
{
	struct table_fill *tf = user;
	char sym[128];
	void *addr = NULL;
	size_t size;

	snprintf(sym, sizeof(sym), "%.*s", (int)len, name);
	for (uint32_t i = 0; i < tf->m->nparts && !addr; i++)
		if (tf->m->parts[i].co &&
		    aql_code_object_symbol(tf->m->parts[i].co, sym, &addr, &size) != AQL_OK)
			addr = NULL;
	if (!addr || tf->t->count == tf->cap) {
		snprintf(tf->missing, sizeof(tf->missing), "%s", sym);
		return 1;
	}
	tf->t->fn[tf->t->count++] = (uint64_t)(uintptr_t)addr;
	return 0;
}

static int count_func(const char *name, size_t len, void *user)
{
	(void)name, (void)len;
	++*(uint32_t *)user;
	return 0;
}

static void module_free(struct CUmod_st *m)
{
	for (uint32_t i = 0; i < m->nparts; i++) {
		aql_code_object_destroy(m->parts[i].co);
		aql_ptx_free(m->parts[i].ptx);
	}
	free(m->parts);
	free(m->table);
	free(m->fns);
	free(m);
}

/* The parts' PTX of a linked image: checked when it was added. */
static CUresult linked_parts(const unsigned char *image, struct CUmod_st *m)
{
	uint32_t n;
	const char *text = (const char *)image + LINK_MAGIC_SIZE + 4;

	memcpy(&n, image + LINK_MAGIC_SIZE, 4);
	m->parts = calloc(n ? n : 1, sizeof(*m->parts));
	if (!m->parts)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < n; i++) {
		if (aql_ptx_parse(text, strlen(text), &m->parts[i].ptx) != AQL_OK)
			return CUDA_ERROR_INVALID_IMAGE;
		m->nparts++;
		text += strlen(text) + 1;
	}
	return CUDA_SUCCESS;
}

/* Bind every part with entries to its host build; the table first, when
 * there is glue (it needs the host builds of its functions, which the
 * parts without a table binding define). */
static CUresult bind_parts(struct CUmod_st *m, const unsigned char *image, char *msg, size_t len)
{
	const char *text = is_linked(image) ? (const char *)image + LINK_MAGIC_SIZE + 4 : NULL;
	const char *glue = NULL;
	aql_symbol_binding bind = { "aql_resident_table_", 0 };
	aql_load_options opts = { &bind, 1 };
	uint32_t cap = 0;

	for (uint32_t i = 0; text && i < m->nparts; i++, text += strlen(text) + 1)
		if (!m->parts[i].ptx->entry_count)
			glue = text;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < m->nparts; i++) {
			aql_ptx_module *ptx = m->parts[i].ptx;

			if (!ptx->entry_count || m->parts[i].co)
				continue;
			m->parts[i].co = find_host_build(ptx, m->table ? &opts : NULL);
			if (!m->parts[i].co && (pass || !glue)) {
				snprintf(msg, len, "aql cuda emulation: no host code object in "
					 "AQL_CUDA_EMU_KERNELS defines every entry of the module "
					 "(first: %s)", ptx->entries[0].name);
				return CUDA_ERROR_INVALID_IMAGE;
			}
		}
		if (pass || !glue)
			break;
		/* The parts that load without the table are loaded; now it. */
		each_func(glue, "extern", count_func, &cap);
		m->table = calloc(1, sizeof(*m->table) + cap * sizeof(uint64_t));
		if (!m->table)
			return CUDA_ERROR_OUT_OF_MEMORY;
		struct table_fill tf = { m, m->table, cap, "" };

		if (each_func(glue, "extern", table_add, &tf)) {
			snprintf(msg, len, "aql cuda emulation: no host build exports %s, which "
				 "the linked switch calls", tf.missing);
			return CUDA_ERROR_INVALID_IMAGE;
		}
		bind.address = (uint64_t)(uintptr_t)m->table;
	}
	return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n, int *options,
			    void **values)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUmod_st *m;
	struct jit_logs logs;
	aql_ptx_module *ptx = NULL;
	char msg[512];
	uint32_t count = 0, k = 0;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	r = jit_options(n, options, values, &logs);
	if (r != CUDA_SUCCESS)
		return r;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (is_linked(image)) {
		r = linked_parts(image, m);
	} else {
		if (is_fatbin(image))
			r = from_fatbin(image, &logs, values, &ptx);
		else if (is_cubin(image))
			r = from_cubin(image, elf_extent(image), &logs, values, &ptx);
		else
			r = from_ptx(image, strlen(image), &logs, values, &ptx);
		if (r == CUDA_SUCCESS && !(m->parts = calloc(1, sizeof(*m->parts)))) {
			aql_ptx_free(ptx);
			r = CUDA_ERROR_OUT_OF_MEMORY;
		}
		if (r == CUDA_SUCCESS) {
			m->parts[0].ptx = ptx;
			m->nparts = 1;
		}
	}
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < m->nparts; i++)
		count += m->parts[i].ptx->entry_count;
	if (r == CUDA_SUCCESS && !(m->fns = calloc(count ? count : 1, sizeof(*m->fns))))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS) {
		msg[0] = 0;
		r = bind_parts(m, image, msg, sizeof(msg));
		if (r != CUDA_SUCCESS && msg[0]) {
			log_put(logs.error, logs.error_size, logs.error_size_index, values, msg);
			fprintf(stderr, "%s\n", msg);
		}
	}
	if (r != CUDA_SUCCESS) {
		module_free(m);
		return r;
	}
	m->ctx = c;
	m->count = count;
	for (uint32_t p = 0; p < m->nparts; p++) {
		const aql_ptx_module *pm = m->parts[p].ptx;

		for (uint32_t i = 0; i < pm->entry_count; i++, k++) {
			struct CUfunc_st *f = &m->fns[k];
			const aql_ptx_entry *e = &pm->entries[i];
			const aql_host_kernel_descriptor *kd;
			uint32_t mt = EMU_MAX_THREADS, req;

			aql_code_object_kernel(m->parts[p].co, e->name, &f->kernel);
			kd = (const aql_host_kernel_descriptor *)(uintptr_t)f->kernel->kernel_object;
			if (kd->max_flat_workgroup_size && kd->max_flat_workgroup_size < mt)
				mt = kd->max_flat_workgroup_size;
			req = e->maxntid[0] ? e->maxntid[0] * (e->maxntid[1] ? e->maxntid[1] : 1) *
						      (e->maxntid[2] ? e->maxntid[2] : 1)
					    : 0;
			if (req && req < mt)
				mt = req;
			f->mod = m;
			f->entry = e;
			f->ptx_version = pm->version[0] * 10 + pm->version[1];
			f->max_threads = mt;
			f->dyn_max = EMU_SHARED_DEFAULT > f->kernel->group_segment_size
					     ? EMU_SHARED_DEFAULT - f->kernel->group_segment_size
					     : 0;
		}
	}
	log_put(logs.info, logs.info_size, logs.info_size_index, values, "");
	EMU_LIST_PUSH(modules, m);
	*module = m;
	return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUmod_st *m;
	unsigned spins = 0;

	if (r != CUDA_SUCCESS)
		return r;
	if (!emu_current)
		return CUDA_ERROR_INVALID_CONTEXT;
	EMU_LIST_TAKE(modules, module, m);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Launches still queued finish with the code they were given. */
	while (atomic_load(&m->pending) != 0)
		emu_pause(&spins);
	module_free(m);
	return atomic_load(&emu_current->sticky);
}

/* The live function fn; under emu.lock. */
static struct CUfunc_st *fn_find(CUfunction fn)
{
	for (struct CUmod_st *m = modules; m; m = m->next)
		if (fn >= m->fns && fn < m->fns + m->count)
			return fn;
	return NULL;
}

CUresult emu_fn_get(CUfunction fn, struct emu_fn_launch *out, uint32_t *max_threads,
		    uint32_t *dyn_max, const aql_ptx_entry **entry)
{
	struct CUfunc_st *f;

	pthread_mutex_lock(&emu.lock);
	f = fn_find(fn);
	if (f) {
		out->kernel = f->kernel;
		out->ctx = f->mod->ctx;
		out->static_lds = f->kernel->group_segment_size;
		out->pending = &f->mod->pending;
		*max_threads = f->max_threads;
		*dyn_max = f->dyn_max;
		*entry = f->entry;
	}
	pthread_mutex_unlock(&emu.lock);
	return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);
	struct CUmod_st *m;

	if (r != CUDA_SUCCESS)
		return r;
	if (!fn || !name)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	for (m = modules; m && m != module; m = m->next)
		;
	r = m ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
	for (uint32_t i = 0; m && i < m->count; i++) {
		if (!strcmp(m->fns[i].entry->name, name)) {
			*fn = &m->fns[i];
			r = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&emu.lock);
	return r;
}

CUresult cuModuleGetGlobal(CUdeviceptr *ptr, size_t *bytes, CUmodule module, const char *name)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);
	struct CUmod_st *m;

	if (r != CUDA_SUCCESS)
		return r;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	for (m = modules; m && m != module; m = m->next)
		;
	pthread_mutex_unlock(&emu.lock);
	(void)ptr;
	(void)bytes;
	/* Globals of the host build are not device memory here: none is
	 * offered, which the reference allows for a name the module lacks. */
	return m ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuFuncGetAttribute(int *value, int attrib, CUfunction fn)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUfunc_st *f;

	if (r != CUDA_SUCCESS)
		return r;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	f = fn_find(fn);
	r = f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (f) {
		switch (attrib) {
		case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
			*value = (int)f->max_threads;
			break;
		case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
			*value = (int)f->kernel->group_segment_size;
			break;
		case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
			*value = 0;
			break;
		case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
			*value = (int)f->kernel->private_segment_size;
			break;
		case CU_FUNC_ATTRIBUTE_NUM_REGS:
			*value = 32;
			break;
		case CU_FUNC_ATTRIBUTE_PTX_VERSION:
			*value = (int)f->ptx_version;
			break;
		case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
			*value = 90;
			break;
		case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
			*value = (int)f->dyn_max;
			break;
		default:
			r = CUDA_ERROR_INVALID_VALUE;
			break;
		}
	}
	pthread_mutex_unlock(&emu.lock);
	return r;
}

CUresult cuFuncSetAttribute(CUfunction fn, int attrib, int value)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUfunc_st *f;

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&emu.lock);
	f = fn_find(fn);
	r = f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	/* Only MAX_DYNAMIC_SHARED_SIZE_BYTES, up to the opt-in maximum less
	 * the static shared memory (cuFuncSetAttribute reference). */
	if (f && (attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 ||
		  (uint64_t)value + f->kernel->group_segment_size > EMU_SHARED_OPTIN))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		f->dyn_max = (uint32_t)value;
	pthread_mutex_unlock(&emu.lock);
	return r;
}
