/* SPDX-License-Identifier: MIT */
/*
 * Code object readers and executables over aql's loader: loading a code
 * object for an agent is aql_code_object_load() (the host build of a
 * kernel on the CPU agent, a .hsaco on an AMD one), and a kernel's symbol
 * ("name.kd") is its aql_kernel. Symbols of variables are found by name
 * (aql_code_object_symbol()) but not listed, since libaql names only the
 * kernels of a code object. An executable has symbols once it is frozen.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <aql/code_object.h>

#include "hsa_impl.h"

struct reader {
	const void *image;
	size_t size;
	void *owned;		/* the file's contents; NULL for memory */
};

struct symbol {
	struct executable *exec;
	struct loaded *loaded;
	hsa_symbol_kind_t kind;
	const aql_kernel *kernel;	/* kernels */
	void *address;			/* variables */
	size_t size;
	char *name;			/* "saxpy.kd" for kernels */
};

struct loaded {
	struct hsa_rt_agent *agent;
	aql_code_object *co;
	uint32_t count, cap;		/* symbols: kernels first, then variables */
	struct symbol **symbols;
};

struct executable {
	pthread_mutex_t lock;
	hsa_profile_t profile;
	hsa_default_float_rounding_mode_t rounding;
	int frozen;
	uint32_t count;
	struct loaded **loaded;
};

static struct hsa_rt_set readers = HSA_RT_SET_INIT;
static struct hsa_rt_set executables = HSA_RT_SET_INIT;
static struct hsa_rt_set symbols = HSA_RT_SET_INIT;

static hsa_status_t new_reader(const void *image, size_t size, void *owned,
			       hsa_code_object_reader_t *out)
{
	struct reader *r = malloc(sizeof(*r));

	if (!r || hsa_rt_set_add(&readers, r)) {
		free(r);
		free(owned);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the reader");
	}
	r->image = image;
	r->size = size;
	r->owned = owned;
	out->handle = (uint64_t)(uintptr_t)r;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_code_object_reader_create_from_memory(const void *code_object, size_t size,
						       hsa_code_object_reader_t *code_object_reader)
{
	HSA_RT_CHECK_INIT();
	if (!code_object || !size || !code_object_reader)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "code_object is NULL, size is 0 or code_object_reader is NULL");
	return new_reader(code_object, size, NULL, code_object_reader);
}

/* The whole file, from its start whatever the descriptor's offset. */
hsa_status_t hsa_code_object_reader_create_from_file(hsa_file_t file,
						     hsa_code_object_reader_t *code_object_reader)
{
	struct stat st;
	char *buf;
	size_t done = 0;

	HSA_RT_CHECK_INIT();
	if (!code_object_reader)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "code_object_reader is NULL");
	if (file < 0 || fstat(file, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_FILE,
				   "file descriptor %d is not an open, non-empty regular file", file);
	buf = malloc((size_t)st.st_size);
	if (!buf)
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
				   "no memory for the %lld bytes of the file", (long long)st.st_size);
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(file, buf + done, (size_t)st.st_size - done, (off_t)done);

		if (n <= 0) {
			free(buf);
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_FILE,
					   "reading file descriptor %d failed at byte %zu", file, done);
		}
		done += (size_t)n;
	}
	return new_reader(buf, done, buf, code_object_reader);
}

hsa_status_t hsa_code_object_reader_destroy(hsa_code_object_reader_t code_object_reader)
{
	struct reader *r = (struct reader *)(uintptr_t)code_object_reader.handle;

	HSA_RT_CHECK_INIT();
	if (!hsa_rt_set_remove(&readers, r))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER,
				   "0x%llx is not a live code object reader",
				   (unsigned long long)code_object_reader.handle);
	free(r->owned);
	free(r);
	return HSA_STATUS_SUCCESS;
}

static struct executable *exec_from(hsa_executable_t executable)
{
	struct executable *e = (struct executable *)(uintptr_t)executable.handle;

	return hsa_rt_set_has(&executables, e) ? e : NULL;
}

static hsa_status_t bad_exec(hsa_executable_t executable)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_EXECUTABLE, "0x%llx is not a live executable",
			   (unsigned long long)executable.handle);
}

hsa_status_t hsa_executable_create_alt(hsa_profile_t profile,
				       hsa_default_float_rounding_mode_t default_float_rounding_mode,
				       const char *options, hsa_executable_t *executable)
{
	struct executable *e;

	(void)options;
	HSA_RT_CHECK_INIT();
	if (!executable)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "executable is NULL");
	if (profile != HSA_PROFILE_BASE && profile != HSA_PROFILE_FULL)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "profile %d is unknown",
				   (int)profile);
	if ((unsigned)default_float_rounding_mode > HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "default_float_rounding_mode %d is unknown",
				   (int)default_float_rounding_mode);
	e = calloc(1, sizeof(*e));
	if (!e || hsa_rt_set_add(&executables, e)) {
		free(e);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the executable");
	}
	pthread_mutex_init(&e->lock, NULL);
	e->profile = profile;
	e->rounding = default_float_rounding_mode;
	executable->handle = (uint64_t)(uintptr_t)e;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_executable_create(hsa_profile_t profile, hsa_executable_state_t executable_state,
				   const char *options, hsa_executable_t *executable)
{
	HSA_RT_CHECK_INIT();
	if (executable_state != HSA_EXECUTABLE_STATE_UNFROZEN)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "an executable is created unfrozen");
	return hsa_executable_create_alt(profile, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					 options, executable);
}

static int add_symbol(struct loaded *l, struct symbol *s)
{
	if (l->count == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 8;
		struct symbol **p = realloc(l->symbols, cap * sizeof(*p));

		if (!p)
			return -1;
		l->symbols = p;
		l->cap = cap;
	}
	if (hsa_rt_set_add(&symbols, s))
		return -1;
	l->symbols[l->count++] = s;
	return 0;
}

static void free_loaded(struct loaded *l)
{
	for (uint32_t i = 0; i < l->count; i++) {
		hsa_rt_set_remove(&symbols, l->symbols[i]);
		free(l->symbols[i]->name);
		free(l->symbols[i]);
	}
	free(l->symbols);
	free(l);
}

/* A symbol for every kernel of l, named as the code object names it. */
static int add_kernels(struct executable *e, struct loaded *l)
{
	const aql_code_object_info *info = aql_code_object_get_info(l->co);

	for (uint32_t i = 0; i < info->kernel_count; i++) {
		const aql_kernel *k = &info->kernels[i];
		struct symbol *s = calloc(1, sizeof(*s));
		size_t len = strlen(k->name);

		if (!s)
			return -1;
		s->exec = e;
		s->loaded = l;
		s->kind = HSA_SYMBOL_KIND_KERNEL;
		s->kernel = k;
		s->name = malloc(len + 4);
		if (!s->name) {
			free(s);
			return -1;
		}
		memcpy(s->name, k->name, len);
		memcpy(s->name + len, ".kd", 4);
		if (add_symbol(l, s)) {
			free(s->name);
			free(s);
			return -1;
		}
	}
	return 0;
}

hsa_status_t hsa_executable_load_agent_code_object(hsa_executable_t executable, hsa_agent_t agent,
						   hsa_code_object_reader_t code_object_reader,
						   const char *options,
						   hsa_loaded_code_object_t *loaded_code_object)
{
	struct executable *e;
	struct hsa_rt_agent *a;
	struct reader *r = (struct reader *)(uintptr_t)code_object_reader.handle;
	struct loaded *l, **list;
	aql_status st;
	hsa_status_t hst = HSA_STATUS_SUCCESS;

	(void)options;
	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	a = hsa_rt_agent_from(agent);
	if (!a)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
				   (unsigned long long)agent.handle);
	if (!hsa_rt_set_has(&readers, r))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER,
				   "0x%llx is not a live code object reader",
				   (unsigned long long)code_object_reader.handle);
	l = calloc(1, sizeof(*l));
	if (!l)
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the code object");
	l->agent = a;
	pthread_mutex_lock(&e->lock);
	if (e->frozen) {
		hst = hsa_rt_fail(HSA_STATUS_ERROR_FROZEN_EXECUTABLE,
				  "code objects are loaded before hsa_executable_freeze()");
		goto out;
	}
	st = aql_code_object_load(a->agent, r->image, r->size, NULL, &l->co);
	if (st == AQL_ERR_UNSUPPORTED) {
		hst = hsa_rt_fail(HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, "%s: %s", a->info.name,
				  aql_error_message());
		goto out;
	}
	if (st != AQL_OK) {
		hst = hsa_rt_from_aql(st, HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
		goto out;
	}
	list = realloc(e->loaded, (e->count + 1) * sizeof(*list));
	if (!list || add_kernels(e, l)) {
		if (list)
			e->loaded = list;
		hst = hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory for the symbols");
		goto out;
	}
	e->loaded = list;
	e->loaded[e->count++] = l;
	if (loaded_code_object)
		loaded_code_object->handle = (uint64_t)(uintptr_t)l;
out:
	pthread_mutex_unlock(&e->lock);
	if (hst != HSA_STATUS_SUCCESS) {
		if (l->co)
			aql_code_object_destroy(l->co);
		free_loaded(l);
	}
	return hst;
}

hsa_status_t hsa_executable_freeze(hsa_executable_t executable, const char *options)
{
	struct executable *e;
	hsa_status_t st = HSA_STATUS_SUCCESS;

	(void)options;
	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	pthread_mutex_lock(&e->lock);
	if (e->frozen)
		st = hsa_rt_fail(HSA_STATUS_ERROR_FROZEN_EXECUTABLE, "the executable is already frozen");
	e->frozen = 1;
	pthread_mutex_unlock(&e->lock);
	return st;
}

/*
 * Loading already checked what validation asks: aql's loader refuses a
 * code object whose descriptors and metadata disagree, or that leaves a
 * symbol undefined, so a loaded executable is valid (0).
 */
hsa_status_t hsa_executable_validate_alt(hsa_executable_t executable, const char *options,
					 uint32_t *result)
{
	(void)options;
	HSA_RT_CHECK_INIT();
	if (!exec_from(executable))
		return bad_exec(executable);
	if (!result)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "result is NULL");
	*result = 0;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_executable_validate(hsa_executable_t executable, uint32_t *result)
{
	return hsa_executable_validate_alt(executable, NULL, result);
}

/*
 * Unload every code object of e. One still running a kernel
 * (AQL_ERR_BUSY) stays, with those before it, and its status is returned.
 */
static aql_status unload(struct executable *e)
{
	aql_status st = AQL_OK;

	pthread_mutex_lock(&e->lock);
	while (e->count && st == AQL_OK) {
		struct loaded *l = e->loaded[e->count - 1];

		st = aql_code_object_destroy(l->co);
		if (st == AQL_OK) {
			free_loaded(l);
			e->count--;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return st;
}

static void free_executable(struct executable *e)
{
	pthread_mutex_destroy(&e->lock);
	free(e->loaded);
	free(e);
}

/* A code object still in use by a packet in flight keeps the executable. */
hsa_status_t hsa_executable_destroy(hsa_executable_t executable)
{
	struct executable *e;
	aql_status st;

	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	st = unload(e);
	if (st != AQL_OK)
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_RESOURCE_FREE);
	hsa_rt_set_remove(&executables, e);
	free_executable(e);
	return HSA_STATUS_SUCCESS;
}

/* After the queues: no kernel of these code objects can be in flight. */
void hsa_rt_release_executables(void)
{
	struct executable *e;
	struct reader *r;

	while ((e = hsa_rt_set_pop(&executables))) {
		unload(e);
		free_executable(e);
	}
	while ((r = hsa_rt_set_pop(&readers))) {
		free(r->owned);
		free(r);
	}
}

hsa_status_t hsa_executable_get_info(hsa_executable_t executable, hsa_executable_info_t attribute,
				     void *value)
{
	struct executable *e;

	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	if (!value)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "value is NULL");
	switch (attribute) {
	case HSA_EXECUTABLE_INFO_PROFILE:
		*(hsa_profile_t *)value = e->profile;
		return HSA_STATUS_SUCCESS;
	case HSA_EXECUTABLE_INFO_STATE:
		pthread_mutex_lock(&e->lock);
		*(hsa_executable_state_t *)value = e->frozen ? HSA_EXECUTABLE_STATE_FROZEN
							     : HSA_EXECUTABLE_STATE_UNFROZEN;
		pthread_mutex_unlock(&e->lock);
		return HSA_STATUS_SUCCESS;
	case HSA_EXECUTABLE_INFO_DEFAULT_FLOAT_ROUNDING_MODE:
		*(hsa_default_float_rounding_mode_t *)value = e->rounding;
		return HSA_STATUS_SUCCESS;
	}
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "executable attribute %d is unknown",
			   (int)attribute);
}

/* A variable's symbol, made when first asked for by name; NULL if none. */
static struct symbol *find_variable(struct executable *e, struct loaded *l, const char *name)
{
	struct symbol *s;
	void *address;
	size_t size;

	for (uint32_t i = 0; i < l->count; i++)
		if (!strcmp(l->symbols[i]->name, name))
			return l->symbols[i];
	if (aql_code_object_symbol(l->co, name, &address, &size) != AQL_OK)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->exec = e;
	s->loaded = l;
	s->kind = HSA_SYMBOL_KIND_VARIABLE;
	s->address = address;
	s->size = size;
	s->name = strdup(name);
	if (!s->name || add_symbol(l, s)) {
		free(s->name);
		free(s);
		return NULL;
	}
	return s;
}

/*
 * The symbol named name on agent (any agent when NULL: ROCr's programs
 * often pass the kernel agent, and aql has no program-allocation
 * symbols to keep apart).
 */
hsa_status_t hsa_executable_get_symbol_by_name(hsa_executable_t executable,
					       const char *symbol_name, const hsa_agent_t *agent,
					       hsa_executable_symbol_t *symbol)
{
	struct executable *e;
	struct hsa_rt_agent *a = NULL;
	struct symbol *found = NULL;

	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	if (!symbol_name || !symbol)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "symbol_name or symbol is NULL");
	if (agent) {
		a = hsa_rt_agent_from(*agent);
		if (!a)
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
					   (unsigned long long)agent->handle);
	}
	pthread_mutex_lock(&e->lock);
	if (!e->frozen) {
		pthread_mutex_unlock(&e->lock);
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SYMBOL_NAME,
				   "no symbol %s: the executable is not frozen", symbol_name);
	}
	for (uint32_t i = 0; i < e->count && !found; i++) {
		struct loaded *l = e->loaded[i];

		if (!a || l->agent == a)
			found = find_variable(e, l, symbol_name);
	}
	pthread_mutex_unlock(&e->lock);
	if (!found)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_SYMBOL_NAME,
				   "no symbol %s in the executable%s%s", symbol_name,
				   a ? " for " : "", a ? a->info.name : "");
	symbol->handle = (uint64_t)(uintptr_t)found;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_executable_get_symbol(hsa_executable_t executable, const char *module_name,
				       const char *symbol_name, hsa_agent_t agent,
				       int32_t call_convention, hsa_executable_symbol_t *symbol)
{
	(void)module_name, (void)call_convention;
	return hsa_executable_get_symbol_by_name(executable, symbol_name, &agent, symbol);
}

static hsa_status_t copy_out(void *value, const void *src, size_t size)
{
	memcpy(value, src, size);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_executable_symbol_get_info(hsa_executable_symbol_t executable_symbol,
					    hsa_executable_symbol_info_t attribute, void *value)
{
	struct symbol *s = (struct symbol *)(uintptr_t)executable_symbol.handle;
	const aql_kernel *k;
	uint32_t u32;
	uint64_t u64;
	hsa_agent_t agent;
	bool b;

	HSA_RT_CHECK_INIT();
	if (!hsa_rt_set_has(&symbols, s))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL,
				   "0x%llx is not a live symbol",
				   (unsigned long long)executable_symbol.handle);
	if (!value)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "value is NULL");
	k = s->kernel;
	switch ((int)attribute) {
	case HSA_EXECUTABLE_SYMBOL_INFO_TYPE:
		return copy_out(value, &s->kind, sizeof(hsa_symbol_kind_t));
	case HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH:
		u32 = (uint32_t)strlen(s->name);
		return copy_out(value, &u32, sizeof(u32));
	case HSA_EXECUTABLE_SYMBOL_INFO_NAME:
		/* Not NUL-terminated: NAME_LENGTH bytes, as the spec has it. */
		return copy_out(value, s->name, strlen(s->name));
	case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME_LENGTH:
		u32 = 0;
		return copy_out(value, &u32, sizeof(u32));
	case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME:
		return HSA_STATUS_SUCCESS;
	case HSA_EXECUTABLE_SYMBOL_INFO_AGENT:
		agent = hsa_rt_agent_handle(s->loaded->agent);
		return copy_out(value, &agent, sizeof(agent));
	case HSA_EXECUTABLE_SYMBOL_INFO_LINKAGE:
		u32 = HSA_SYMBOL_LINKAGE_PROGRAM;
		return copy_out(value, &u32, sizeof(hsa_symbol_linkage_t));
	case HSA_EXECUTABLE_SYMBOL_INFO_IS_DEFINITION:
		b = true;
		return copy_out(value, &b, sizeof(b));
	}
	if (s->kind == HSA_SYMBOL_KIND_VARIABLE) {
		switch ((int)attribute) {
		case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS:
			u64 = (uint64_t)(uintptr_t)s->address;
			return copy_out(value, &u64, sizeof(u64));
		case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE:
			u32 = (uint32_t)s->size;
			return copy_out(value, &u32, sizeof(u32));
		case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALLOCATION:
			u32 = HSA_VARIABLE_ALLOCATION_AGENT;
			return copy_out(value, &u32, sizeof(hsa_variable_allocation_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT:
			u32 = HSA_VARIABLE_SEGMENT_GLOBAL;
			return copy_out(value, &u32, sizeof(hsa_variable_segment_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST:
			b = false;
			return copy_out(value, &b, sizeof(b));
		}
	} else {
		switch ((int)attribute) {
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT:
			return copy_out(value, &k->kernel_object, sizeof(uint64_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE:
			return copy_out(value, &k->kernarg_size, sizeof(uint32_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT:
			return copy_out(value, &k->kernarg_align, sizeof(uint32_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE:
			return copy_out(value, &k->group_segment_size, sizeof(uint32_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE:
			return copy_out(value, &k->private_segment_size, sizeof(uint32_t));
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK:
			b = k->descriptor.uses_dynamic_stack != 0;
			return copy_out(value, &b, sizeof(b));
		case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_CALL_CONVENTION:
			u32 = 0;
			return copy_out(value, &u32, sizeof(u32));
		}
	}
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
			   "symbol attribute %d does not apply to %s", (int)attribute, s->name);
}

/*
 * Call fn on each kernel symbol of e loaded for a (every agent when NULL);
 * variables found by name are left out, so a listing does not depend on
 * the lookups before it.
 */
static hsa_status_t iterate(struct executable *e, struct hsa_rt_agent *a,
			    hsa_status_t (*fn)(struct symbol *s, void *ctx), void *ctx)
{
	hsa_status_t st = HSA_STATUS_SUCCESS;

	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < e->count && st == HSA_STATUS_SUCCESS; i++) {
		struct loaded *l = e->loaded[i];

		for (uint32_t j = 0; j < l->count && st == HSA_STATUS_SUCCESS; j++)
			if ((!a || l->agent == a) && l->symbols[j]->kind == HSA_SYMBOL_KIND_KERNEL)
				st = fn(l->symbols[j], ctx);
	}
	pthread_mutex_unlock(&e->lock);
	return st;
}

struct iterate_ctx {
	hsa_executable_t executable;
	hsa_status_t (*callback)(hsa_executable_t exec, hsa_executable_symbol_t symbol, void *data);
	hsa_status_t (*agent_callback)(hsa_executable_t exec, hsa_agent_t agent,
				       hsa_executable_symbol_t symbol, void *data);
	void *data;
};

static hsa_status_t call_back(struct symbol *s, void *ctx)
{
	struct iterate_ctx *c = ctx;
	hsa_executable_symbol_t symbol = { (uint64_t)(uintptr_t)s };

	if (c->agent_callback)
		return c->agent_callback(c->executable, hsa_rt_agent_handle(s->loaded->agent),
					 symbol, c->data);
	return c->callback(c->executable, symbol, c->data);
}

hsa_status_t hsa_executable_iterate_symbols(hsa_executable_t executable,
					    hsa_status_t (*callback)(hsa_executable_t exec,
								     hsa_executable_symbol_t symbol,
								     void *data),
					    void *data)
{
	struct iterate_ctx c = { .executable = executable, .callback = callback, .data = data };
	struct executable *e;

	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	if (!callback)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "callback is NULL");
	return iterate(e, NULL, call_back, &c);
}

hsa_status_t hsa_executable_iterate_agent_symbols(hsa_executable_t executable, hsa_agent_t agent,
						  hsa_status_t (*callback)(hsa_executable_t exec,
									   hsa_agent_t agent,
									   hsa_executable_symbol_t symbol,
									   void *data),
						  void *data)
{
	struct iterate_ctx c = { .executable = executable, .agent_callback = callback, .data = data };
	struct executable *e;
	struct hsa_rt_agent *a;

	HSA_RT_CHECK_INIT();
	e = exec_from(executable);
	if (!e)
		return bad_exec(executable);
	a = hsa_rt_agent_from(agent);
	if (!a)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
				   (unsigned long long)agent.handle);
	if (!callback)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "callback is NULL");
	return iterate(e, a, call_back, &c);
}

/* aql's kernels and variables all have agent allocation: no program symbols. */
hsa_status_t hsa_executable_iterate_program_symbols(hsa_executable_t executable,
						    hsa_status_t (*callback)(hsa_executable_t exec,
									     hsa_executable_symbol_t symbol,
									     void *data),
						    void *data)
{
	(void)data;
	HSA_RT_CHECK_INIT();
	if (!exec_from(executable))
		return bad_exec(executable);
	if (!callback)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "callback is NULL");
	return HSA_STATUS_SUCCESS;
}
