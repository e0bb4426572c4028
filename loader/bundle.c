/* SPDX-License-Identifier: MIT */
/*
 * Clang offload bundles, as clang-offload-bundler writes them (all integers
 * little-endian):
 *
 *   "__CLANG_OFFLOAD_BUNDLE__"  24-byte magic
 *   u64 count
 *   count x { u64 offset; u64 size; u64 id_len; char id[id_len]; }
 *   entry data, each at offset bytes from the bundle start
 *
 * Ids are "<kind>-<arch>-<vendor>-<os>-<env>[-<target id>]", e.g.
 * "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-". A compressed bundle starts
 * with "CCOB", u16 version, u16 method (0 zlib, 1 zstd), then sizes and a
 * hash whose widths depend on the version; aql reads that header only.
 */
#include <gelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/bundle.h>
#include "util/error.h"

#define MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define MAGIC_LEN 24u
#define HEADER_LEN (MAGIC_LEN + 8u)
#define ENTRY_HEADER_LEN 24u
/* Real ids are under 100 bytes; this only stops nonsense early. */
#define MAX_ID_LEN 1024u
#define CCOB_MAGIC "CCOB"
#define AMDGCN_TRIPLE "amdgcn-amd-amdhsa-"

struct aql_bundle {
	uint32_t count;
	aql_bundle_entry *entries;
	char *ids;		/* count NUL-terminated ids, back to back */
};

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

bool aql_bundle_is_bundle(const void *data, size_t size)
{
	if (!data)
		return false;
	if (size >= MAGIC_LEN && !memcmp(data, MAGIC, MAGIC_LEN))
		return true;
	return size >= 4 && !memcmp(data, CCOB_MAGIC, 4);
}

/* Refuse a compressed bundle, saying what it is; malformed headers are errors. */
static aql_status refuse_compressed(const uint8_t *p, size_t size)
{
	uint16_t version, method;
	uint64_t file_size = 0, raw_size;
	size_t header;
	const char *name;

	if (size < 8)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle of %zu bytes is shorter than its "
				"8-byte header", size);
	version = get_u16(p + 4);
	method = get_u16(p + 6);
	switch (version) {
	case 1: header = 20; break;
	case 2: header = 24; break;
	case 3: header = 32; break;
	default:
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"compressed offload bundle (CCOB v%u, method %u) is not supported; "
				"unbundle it with clang-offload-bundler -decompress",
				version, method);
	}
	if (size < header)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u) of %zu bytes is shorter "
				"than its %zu-byte header", version, size, header);
	if (version == 1) {
		raw_size = get_u32(p + 8);
	} else if (version == 2) {
		file_size = get_u32(p + 8);
		raw_size = get_u32(p + 12);
	} else {
		file_size = get_u64(p + 8);
		raw_size = get_u64(p + 16);
	}
	if (version >= 2 && (file_size < header || file_size > size))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u) claims %llu bytes, but "
				"%zu are present", version, (unsigned long long)file_size, size);
	name = method == 0 ? "zlib" : method == 1 ? "zstd" : NULL;
	if (!name)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"compressed offload bundle (CCOB v%u, unknown method %u) is not "
				"supported; unbundle it with clang-offload-bundler -decompress",
				version, method);
	return aql_fail(AQL_ERR_UNSUPPORTED,
			"compressed offload bundle (CCOB v%u, %s, %llu bytes uncompressed) "
			"is not supported; unbundle it with clang-offload-bundler -decompress",
			version, name, (unsigned long long)raw_size);
}

static int by_offset(const void *a, const void *b)
{
	const aql_bundle_entry *x = *(const aql_bundle_entry *const *)a;
	const aql_bundle_entry *y = *(const aql_bundle_entry *const *)b;

	if (x->data != y->data)
		return (uintptr_t)x->data < (uintptr_t)y->data ? -1 : 1;
	return x->size < y->size ? -1 : x->size > y->size;
}

static int by_id(const void *a, const void *b)
{
	return strcmp((*(const aql_bundle_entry *const *)a)->id,
		      (*(const aql_bundle_entry *const *)b)->id);
}

/* Overlapping entries and repeated ids, found by sorting; O(n log n). */
static aql_status check_entries(const aql_bundle *b, const uint8_t *base)
{
	const aql_bundle_entry **order;
	aql_status st = AQL_OK;

	if (b->count < 2)
		return AQL_OK;
	order = malloc(b->count * sizeof(*order));
	if (!order)
		return aql_fail(AQL_ERR_NOMEM, "bundle of %u entries: no memory to check them",
				b->count);
	for (uint32_t i = 0; i < b->count; i++)
		order[i] = &b->entries[i];
	qsort(order, b->count, sizeof(*order), by_offset);
	/* Empty entries (the host one is) take no bytes, so overlap nothing. */
	for (uint32_t i = 0, last = UINT32_MAX; i < b->count; i++) {
		const aql_bundle_entry *e = order[i], *prev;

		if (!e->size)
			continue;
		if (last != UINT32_MAX) {
			prev = order[last];
			if ((const uint8_t *)prev->data + prev->size > (const uint8_t *)e->data) {
				st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					      "bundle entries \"%s\" (bytes %zu-%zu) and \"%s\" "
					      "(bytes %zu-%zu) overlap",
					      prev->id, (size_t)((const uint8_t *)prev->data - base),
					      (size_t)((const uint8_t *)prev->data - base) + prev->size,
					      e->id, (size_t)((const uint8_t *)e->data - base),
					      (size_t)((const uint8_t *)e->data - base) + e->size);
				goto out;
			}
		}
		last = i;
	}
	qsort(order, b->count, sizeof(*order), by_id);
	for (uint32_t i = 1; i < b->count; i++) {
		if (!strcmp(order[i - 1]->id, order[i]->id)) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "bundle has two entries with id \"%s\"", order[i]->id);
			goto out;
		}
	}
out:
	free(order);
	return st;
}

/* Printable, no spaces, "<kind>-<triple>": anything else is not an id. */
static aql_status check_id(const uint8_t *id, uint64_t len, uint32_t index)
{
	const uint8_t *dash;

	for (uint64_t i = 0; i < len; i++)
		if (id[i] < 0x21 || id[i] > 0x7e)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"bundle entry %u: id has byte 0x%02x at %llu, not a "
					"printable character", index, id[i], (unsigned long long)i);
	dash = memchr(id, '-', len);
	if (!dash || dash == id || dash == id + len - 1)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"bundle entry %u: id \"%.*s\" is not <kind>-<triple>",
				index, (int)len, (const char *)id);
	return AQL_OK;
}

/*
 * Fill the target of an amdgcn entry. A target ID this build does not know
 * (a newer processor or feature) is not a malformed bundle: the entry stays
 * listed with an empty target and is never selected.
 */
static void describe(aql_bundle_entry *e)
{
	const char *triple = strchr(e->id, '-') + 1;
	const char *tid;

	if (strncmp(triple, AMDGCN_TRIPLE, strlen(AMDGCN_TRIPLE)))
		return;
	e->is_amdgcn = true;
	tid = triple + strlen(AMDGCN_TRIPLE);
	if (*tid == '-')
		tid++;
	if (aql_target_parse(tid, &e->target) != AQL_OK)
		memset(&e->target, 0, sizeof(e->target));
}

static aql_status open_plain(const uint8_t *p, size_t size, aql_bundle **out)
{
	uint64_t count, pos, ids_len = 0;
	aql_bundle *b;
	aql_status st;
	char *ids;

	if (size < HEADER_LEN)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"offload bundle of %zu bytes is shorter than its %u-byte header",
				size, HEADER_LEN);
	count = get_u64(p + MAGIC_LEN);
	/* Each entry needs its 24-byte header and an id of at least 3 bytes. */
	if (count > (size - HEADER_LEN) / (ENTRY_HEADER_LEN + 3))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"offload bundle claims %llu entries; %zu bytes cannot hold them",
				(unsigned long long)count, size);
	if (count > UINT32_MAX)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"offload bundle claims %llu entries, more than aql lists",
				(unsigned long long)count);
	/* First pass: bounds of every header field, and the room ids need. */
	pos = HEADER_LEN;
	for (uint64_t i = 0; i < count; i++) {
		uint64_t len;

		if (size - pos < ENTRY_HEADER_LEN)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"bundle entry %llu: header at byte %llu runs past the "
					"end (%zu bytes)", (unsigned long long)i,
					(unsigned long long)pos, size);
		len = get_u64(p + pos + 16);
		if (len == 0 || len > MAX_ID_LEN)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"bundle entry %llu: id length %llu is outside 1-%u",
					(unsigned long long)i, (unsigned long long)len, MAX_ID_LEN);
		if (size - pos - ENTRY_HEADER_LEN < len)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"bundle entry %llu: %llu-byte id at byte %llu runs past "
					"the end (%zu bytes)", (unsigned long long)i,
					(unsigned long long)len,
					(unsigned long long)(pos + ENTRY_HEADER_LEN), size);
		st = check_id(p + pos + ENTRY_HEADER_LEN, len, (uint32_t)i);
		if (st != AQL_OK)
			return st;
		pos += ENTRY_HEADER_LEN + len;
		ids_len += len + 1;
	}
	b = calloc(1, sizeof(*b) + count * sizeof(aql_bundle_entry) + ids_len);
	if (!b)
		return aql_fail(AQL_ERR_NOMEM, "offload bundle of %llu entries: out of memory",
				(unsigned long long)count);
	b->count = (uint32_t)count;
	b->entries = (aql_bundle_entry *)(b + 1);
	b->ids = ids = (char *)(b->entries + count);
	/* Second pass: entries' data, which must lie after the headers. */
	for (uint64_t i = 0, at = HEADER_LEN; i < count; i++) {
		uint64_t off = get_u64(p + at), len = get_u64(p + at + 8);
		uint64_t id_len = get_u64(p + at + 16);
		aql_bundle_entry *e = &b->entries[i];

		memcpy(ids, p + at + ENTRY_HEADER_LEN, id_len);
		ids[id_len] = '\0';
		e->id = ids;
		ids += id_len + 1;
		at += ENTRY_HEADER_LEN + id_len;
		if (off < pos || off > size || len > size - off) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "bundle entry \"%s\": bytes %llu+%llu lie outside the "
				      "data area %llu-%zu", e->id, (unsigned long long)off,
				      (unsigned long long)len, (unsigned long long)pos, size);
			goto fail;
		}
		e->data = p + off;
		e->size = (size_t)len;
		describe(e);
	}
	st = check_entries(b, p);
	if (st != AQL_OK)
		goto fail;
	*out = b;
	return AQL_OK;
fail:
	free(b);
	return st;
}

static void init_libelf(void)
{
	elf_version(EV_CURRENT);
}

/* The bytes of the .hip_fatbin section of an ELF image. */
static aql_status find_fatbin(const uint8_t *p, size_t size, const uint8_t **sec,
			      size_t *sec_size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	aql_status st = AQL_OK;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	bool found = false;
	Elf *elf;

	pthread_once(&once, init_libelf);
	/* ELF_C_READ_MMAP semantics: libelf reads the image and never writes it. */
	elf = elf_memory((char *)(uintptr_t)p, size);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "ELF image of %zu bytes: %s",
			      size, elf ? "not an ELF object" : elf_errmsg(-1));
		goto out;
	}
	if (elf_getshdrstrndx(elf, &shstrndx) != 0) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "ELF image: no section name table: %s", elf_errmsg(-1));
		goto out;
	}
	/* libelf shows a cut-off table as no sections; that is not "no bundle". */
	GElf_Ehdr eh = { 0 };
	size_t shdr_size;

	if (!gelf_getehdr(elf, &eh))
		eh.e_shoff = SIZE_MAX;
	shdr_size = eh.e_ident[EI_CLASS] == ELFCLASS64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	if (eh.e_shoff > size || eh.e_shnum > (size - eh.e_shoff) / shdr_size) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "ELF image of %zu bytes: its section header table lies outside it",
			      size);
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".hip_fatbin"))
			continue;
		if (sh.sh_type == SHT_NOBITS || sh.sh_offset > size ||
		    sh.sh_size > size - sh.sh_offset) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      ".hip_fatbin section (offset %llu, %llu bytes) lies outside "
				      "the %zu-byte ELF image",
				      (unsigned long long)sh.sh_offset,
				      (unsigned long long)sh.sh_size, size);
			goto out;
		}
		*sec = p + sh.sh_offset;
		*sec_size = (size_t)sh.sh_size;
		found = true;
		break;
	}
	if (!found)
		st = aql_fail(AQL_ERR_NOT_FOUND,
			      "ELF image has no .hip_fatbin section, so holds no offload bundle");
out:
	elf_end(elf);
	return st;
}

aql_status aql_bundle_open(const void *data, size_t size, aql_bundle **out)
{
	const uint8_t *p = data;
	aql_status st;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_bundle_open: out is NULL");
	*out = NULL;
	if (!data)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_bundle_open: data is NULL");
	if (size >= 4 && !memcmp(p, "\x7f" "ELF", 4)) {
		st = find_fatbin(p, size, &p, &size);
		if (st != AQL_OK)
			return st;
		/* The section holds the bundle, then padding or further bundles. */
		if (!aql_bundle_is_bundle(p, size))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					".hip_fatbin section (%zu bytes) does not start with an "
					"offload bundle", size);
	}
	if (size >= 4 && !memcmp(p, CCOB_MAGIC, 4))
		return refuse_compressed(p, size);
	if (size < MAGIC_LEN || memcmp(p, MAGIC, MAGIC_LEN))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"not an offload bundle: %zu bytes without the "
				"\"" MAGIC "\" magic", size);
	return open_plain(p, size, out);
}

void aql_bundle_close(aql_bundle *bundle)
{
	free(bundle);
}

uint32_t aql_bundle_count(const aql_bundle *bundle)
{
	return bundle ? bundle->count : 0;
}

const aql_bundle_entry *aql_bundle_get(const aql_bundle *bundle, uint32_t i)
{
	if (!bundle || i >= bundle->count)
		return NULL;
	return &bundle->entries[i];
}

/*
 * Higher is better: an exact processor, then each feature pinned on/off.
 * Ties go to the earlier entry.
 */
static int rank(const aql_bundle_entry *e, const aql_target_id *agent)
{
	int score = e->target.mach == agent->mach ? 4 : 0;

	score += e->target.xnack == AQL_FEATURE_ON || e->target.xnack == AQL_FEATURE_OFF;
	score += e->target.sramecc == AQL_FEATURE_ON || e->target.sramecc == AQL_FEATURE_OFF;
	return score;
}

aql_status aql_bundle_select(const aql_bundle *bundle, const aql_target_id *agent,
			     const aql_bundle_entry **out)
{
	const aql_bundle_entry *best = NULL;
	char want[64], list[400];
	size_t used = 0;
	int best_rank = -1;

	if (!bundle || !agent || !out)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_bundle_select: bundle, agent or out is NULL");
	*out = NULL;
	for (uint32_t i = 0; i < bundle->count; i++) {
		const aql_bundle_entry *e = &bundle->entries[i];
		int r;

		if (!e->is_amdgcn || !e->target.mach ||
		    !aql_target_compatible(&e->target, agent))
			continue;
		r = rank(e, agent);
		if (r > best_rank) {
			best = e;
			best_rank = r;
		}
	}
	if (best) {
		*out = best;
		return AQL_OK;
	}
	list[0] = '\0';
	for (uint32_t i = 0; i < bundle->count && used < sizeof(list) - 1; i++) {
		int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
				 bundle->entries[i].id);

		if (n < 0)
			break;
		used += (size_t)n < sizeof(list) - used ? (size_t)n : sizeof(list) - used - 1;
	}
	aql_target_format(agent, want, sizeof(want));
	return aql_fail(AQL_ERR_NOT_FOUND,
			"no bundle entry runs on %s; the bundle holds %u: %s",
			want, bundle->count, bundle->count ? list : "(nothing)");
}
