/* SPDX-License-Identifier: MIT */
/*
 * Host code objects: ELF shared objects for the CPU agent, built from
 * single-source kernels (include/aql/kernel.h). Each kernel is a
 * "<name>.kd" symbol holding an aql_host_kernel_descriptor, whose argument
 * table plays the part of AMDGPU metadata. The descriptors are read from
 * the file before loading, following their pointers through the
 * relocations, so opening an object describes it without running or
 * mapping anything.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "loader/loader_impl.h"
#include "loader/metadata_impl.h"
#include <aql/host_kernel.h>

#define MAX_ARGS 1024u
#define DEFAULT_MAX_WORKGROUP 1024u

/* The dynamic section may ask for what this loader deliberately lacks. */
static aql_status check_dynamic(struct aql_code_object *co)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(co->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Dyn dyn;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || sh.sh_entsize != sizeof(Elf64_Dyn))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"host code object: unreadable dynamic section");
		for (int i = 0; (size_t)i < d->d_size / sizeof(Elf64_Dyn); i++) {
			gelf_getdyn(d, i, &dyn);
			if (dyn.d_tag == DT_NULL)
				break;
			if (dyn.d_tag == DT_NEEDED) {
				const char *lib = elf_strptr(co->elf, sh.sh_link, dyn.d_un.d_val);

				return aql_fail(AQL_ERR_UNSUPPORTED,
						"host code object needs %s (DT_NEEDED); build it with -nostdlib, the loader links no libraries",
						lib ? lib : "a shared library");
			}
			if (dyn.d_tag == DT_INIT || dyn.d_tag == DT_FINI ||
			    ((dyn.d_tag == DT_INIT_ARRAYSZ || dyn.d_tag == DT_FINI_ARRAYSZ ||
			      dyn.d_tag == DT_PREINIT_ARRAYSZ) && dyn.d_un.d_val))
				return aql_fail(AQL_ERR_UNSUPPORTED,
						"host code object has constructors or destructors (dynamic tag %lld), which the loader does not run",
						(long long)dyn.d_tag);
		}
	}
	return AQL_OK;
}

/* A NUL-terminated string of file data at vaddr; NULL for vaddr 0. */
static aql_status read_string(const struct aql_code_object *co, uint64_t vaddr,
			      const char *what, const char **out)
{
	const struct aql_segment *s;
	const char *p;
	uint64_t avail;

	*out = NULL;
	if (vaddr == 0)
		return AQL_OK;
	s = aql_co_segment(co, vaddr, 1);
	if (!s || vaddr - s->vaddr >= s->filesz)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"host code object: %s string at %#llx lies outside the file data",
				what, (unsigned long long)vaddr);
	p = (const char *)co->image + s->offset + (vaddr - s->vaddr);
	avail = s->filesz - (vaddr - s->vaddr);
	if (!memchr(p, 0, avail < AQL_LOADER_MAX_NAME ? avail : AQL_LOADER_MAX_NAME))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"host code object: %s string at %#llx is not terminated",
				what, (unsigned long long)vaddr);
	*out = p;
	return AQL_OK;
}

static aql_status read_args(const struct aql_code_object *co, const char *kname,
			    uint64_t table, uint32_t count, uint32_t kernarg_size,
			    aql_kernel_arg *args)
{
	const size_t stride = sizeof(aql_host_kernel_arg);

	if (count && (!table || !aql_co_file_bytes(co, table, (uint64_t)count * stride)))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %s: argument table of %u entries at %#llx lies outside the file data",
				kname, count, (unsigned long long)table);
	for (uint32_t i = 0; i < count; i++) {
		uint64_t at = table + i * stride, name, type;
		const uint8_t *e = aql_co_file_bytes(co, at, stride);
		aql_host_kernel_arg raw;
		aql_kernel_arg *a = &args[i];
		aql_status st;

		memcpy(&raw, e, stride);
		if ((st = aql_co_read_pointer(co, at + offsetof(aql_host_kernel_arg, name), &name)) ||
		    (st = aql_co_read_pointer(co, at + offsetof(aql_host_kernel_arg, type_name), &type)) ||
		    (st = read_string(co, name, "argument name", &a->name)) ||
		    (st = read_string(co, type, "argument type", &a->type_name)))
			return st;
		if (raw.size == 0 || raw.offset > kernarg_size || raw.size > kernarg_size - raw.offset)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"kernel %s: argument %u (offset %u, size %u) lies outside its %u-byte kernarg segment",
					kname, i, raw.offset, raw.size, kernarg_size);
		a->offset = raw.offset;
		a->size = raw.size;
		a->pointee_align = 0;
		a->kind = raw.kind < AQL_ARG_KIND_COUNT ? (enum aql_arg_kind)raw.kind : AQL_ARG_UNKNOWN;
		a->address_space = raw.address_space <= AQL_AS_REGION ?
				   (enum aql_address_space)raw.address_space : AQL_AS_NONE;
		a->access = raw.access <= AQL_ACCESS_READ_WRITE ? (enum aql_access)raw.access
								 : AQL_ACCESS_NONE;
		a->actual_access = AQL_ACCESS_NONE;
		a->flags = raw.flags;
	}
	return AQL_OK;
}

/* Fill md (pointing into the image) from the descriptor at kd_vaddr. */
static aql_status describe(struct aql_code_object *co, const char *symbol,
			   uint64_t kd_vaddr, aql_kernel_metadata *md,
			   aql_kernel_arg **args)
{
	const uint8_t *bytes = aql_co_file_bytes(co, kd_vaddr, 64);
	aql_host_kernel_descriptor kd;
	uint64_t entry, table, name;
	const struct aql_segment *code;
	aql_status st;

	if (!bytes || (kd_vaddr & 63))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"%s at %#llx is not 64 bytes of file data aligned to 64",
				symbol, (unsigned long long)kd_vaddr);
	memcpy(&kd, bytes, sizeof(kd));
	if (kd.magic != AQL_HOST_KD_MAGIC)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"%s is not a host kernel descriptor (magic %#x, expected %#x)",
				symbol, kd.magic, AQL_HOST_KD_MAGIC);
	if ((st = aql_co_read_pointer(co, kd_vaddr + offsetof(aql_host_kernel_descriptor, entry), &entry)) ||
	    (st = aql_co_read_pointer(co, kd_vaddr + offsetof(aql_host_kernel_descriptor, args), &table)) ||
	    (st = aql_co_read_pointer(co, kd_vaddr + offsetof(aql_host_kernel_descriptor, name), &name)))
		return aql_fail_prefix(st, symbol);
	code = aql_co_segment(co, entry, 1);
	if (!code || !(code->flags & PF_X))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"%s: entry point %#llx is not in an executable segment",
				symbol, (unsigned long long)entry);
	if (kd.arg_count > MAX_ARGS)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "%s: %u arguments (at most %u)",
				symbol, kd.arg_count, MAX_ARGS);
	if (kd.kernarg_align & (kd.kernarg_align - 1))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"%s: kernarg alignment %u is not a power of two",
				symbol, kd.kernarg_align);
	*args = calloc(kd.arg_count ? kd.arg_count : 1, sizeof(**args));
	if (!*args)
		return aql_fail(AQL_ERR_NOMEM, "%s: %u arguments", symbol, kd.arg_count);
	if ((st = read_string(co, name, "kernel name", &md->name)) ||
	    (st = read_args(co, symbol, table, kd.arg_count, kd.kernarg_size, *args)))
		return st;
	md->symbol = symbol;
	md->language = "C";
	md->kernarg_segment_size = kd.kernarg_size;
	md->kernarg_segment_align = kd.kernarg_align ? kd.kernarg_align : 16;
	md->group_segment_fixed_size = kd.group_segment_fixed_size;
	md->private_segment_fixed_size = kd.private_segment_fixed_size;
	md->max_flat_workgroup_size = kd.max_flat_workgroup_size ? kd.max_flat_workgroup_size
								  : DEFAULT_MAX_WORKGROUP;
	md->wavefront_size = 1;
	md->uses_dynamic_stack = -1;
	md->workgroup_processor_mode = -1;
	md->uniform_work_group_size = -1;
	md->arg_count = kd.arg_count;
	md->args = *args;
	return AQL_OK;
}

static aql_status find_kernels(struct aql_code_object *co, aql_kernel_metadata *mds,
			       aql_kernel_arg **args, char **names, uint64_t *kd_vaddr,
			       uint32_t *count)
{
	*count = 0;
	for (size_t i = 1; i < co->symbol_count; i++) {
		GElf_Sym sym;
		const char *n;
		size_t len;
		aql_status st;

		if (!gelf_getsym(co->symbols, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
			continue;
		n = aql_co_symbol_name(co, &sym);
		len = n ? strlen(n) : 0;
		if (len <= 3 || strcmp(n + len - 3, ".kd") != 0)
			continue;
		if (mds) {
			aql_kernel_metadata *md = &mds[*count];

			st = describe(co, n, sym.st_value, md, &args[*count]);
			if (st != AQL_OK)
				return st;
			if (!md->name) {
				names[*count] = strndup(n, len - 3);
				if (!names[*count])
					return aql_fail(AQL_ERR_NOMEM, "kernel name");
				md->name = names[*count];
			}
			kd_vaddr[*count] = sym.st_value;
		}
		++*count;
	}
	return AQL_OK;
}

aql_status aql_host_object_describe(struct aql_code_object *co)
{
	aql_kernel_metadata *mds = NULL;
	aql_kernel_arg **args = NULL;
	char **names = NULL;
	uint64_t *kd_vaddr = NULL;
	uint32_t n = 0;
	aql_status st;

	if ((st = check_dynamic(co)) != AQL_OK ||
	    (st = aql_co_index_pointers(co)) != AQL_OK ||
	    (st = find_kernels(co, NULL, NULL, NULL, NULL, &n)) != AQL_OK)
		return st;
	mds = calloc(n + 1, sizeof(*mds));
	args = calloc(n + 1, sizeof(*args));
	names = calloc(n + 1, sizeof(*names));
	kd_vaddr = calloc(n + 1, sizeof(*kd_vaddr));
	co->kernels = calloc(n + 1, sizeof(*co->kernels));
	if (!mds || !args || !names || !kd_vaddr || !co->kernels) {
		st = aql_fail(AQL_ERR_NOMEM, "%u host kernels", n);
		goto out;
	}
	if ((st = find_kernels(co, mds, args, names, kd_vaddr, &n)) != AQL_OK)
		goto out;
	if ((st = aql_metadata_build(mds, n, &co->metadata)) != AQL_OK)
		goto out;
	aql_co_kernels_from_metadata(co);
	for (uint32_t i = 0; i < n; i++) {
		const aql_kernel_metadata *md = &co->metadata->kernels[i];
		aql_kernel *k = &co->kernels[i];

		k->descriptor.group_segment_fixed_size = md->group_segment_fixed_size;
		k->descriptor.private_segment_fixed_size = md->private_segment_fixed_size;
		k->kernel_object = kd_vaddr[i];
		k->group_segment_size = md->group_segment_fixed_size;
		k->private_segment_size = md->private_segment_fixed_size;
	}
out:
	for (uint32_t i = 0; args && names && i <= n; i++) {
		free(args[i]);
		free(names[i]);
	}
	free(mds);
	free(args);
	free(names);
	free(kd_vaddr);
	return st;
}
