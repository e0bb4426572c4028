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
 * "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-".
 *
 * A compressed bundle ("CCOB") wraps one plain bundle:
 *
 *   v1: "CCOB" u16 version u16 method u32 raw_size u64 hash         20 bytes
 *   v2: "CCOB" u16 version u16 method u32 file_size u32 raw_size u64 hash
 *   v3: "CCOB" u16 version u16 method u64 file_size u64 raw_size u64 hash
 *
 * then the zlib (method 0) or zstd (method 1) stream. file_size counts the
 * header too; v1 has none, so its end is where the stream ends. The hash
 * identifies the content for caches and is not checked.
 *
 * The .hip_fatbin section of a linked HIP program holds one bundle per
 * translation unit, each aligned (4096 bytes by clang), zero bytes between.
 */
#include <gelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

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
/* What all compressed bundles of one input may expand to, together. */
#define MAX_DECOMPRESSED (1ull << 30)

struct aql_bundle {
	uint32_t count, cap;
	uint32_t parts;
	aql_bundle_entry *entries;
	void **owned;		/* id blocks and decompressed bundles */
	uint32_t owned_count, owned_cap;
	uint64_t decompressed;	/* bytes, against MAX_DECOMPRESSED */
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

/* Overlapping entries and repeated ids within one bundle; O(n log n). */
static aql_status check_entries(const aql_bundle_entry *entries, uint32_t n,
				const uint8_t *base)
{
	const aql_bundle_entry **order;
	aql_status st = AQL_OK;

	if (n < 2)
		return AQL_OK;
	order = malloc(n * sizeof(*order));
	if (!order)
		return aql_fail(AQL_ERR_NOMEM, "bundle of %u entries: no memory to check them", n);
	for (uint32_t i = 0; i < n; i++)
		order[i] = &entries[i];
	qsort(order, n, sizeof(*order), by_offset);
	/* Empty entries (the host one is) take no bytes, so overlap nothing. */
	for (uint32_t i = 0, last = UINT32_MAX; i < n; i++) {
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
	qsort(order, n, sizeof(*order), by_id);
	for (uint32_t i = 1; i < n; i++) {
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

/* Keep mem until the bundle is closed; frees it if that fails. */
static aql_status own(aql_bundle *b, void *mem)
{
	if (b->owned_count == b->owned_cap) {
		uint32_t cap = b->owned_cap ? 2 * b->owned_cap : 8;
		void **n = realloc(b->owned, cap * sizeof(*n));

		if (!n) {
			free(mem);
			return aql_fail(AQL_ERR_NOMEM, "offload bundle: out of memory");
		}
		b->owned = n;
		b->owned_cap = cap;
	}
	b->owned[b->owned_count++] = mem;
	return AQL_OK;
}

/* Room for n more entries. */
static aql_status reserve(aql_bundle *b, uint64_t n)
{
	uint64_t want = b->count + n, cap = b->cap ? b->cap : 8;
	aql_bundle_entry *e;

	if (want > UINT32_MAX)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"offload bundles hold more than %u entries, more than aql lists",
				UINT32_MAX);
	if (want <= b->cap)
		return AQL_OK;
	while (cap < want)
		cap *= 2;
	if (cap > UINT32_MAX)
		cap = UINT32_MAX;
	e = realloc(b->entries, cap * sizeof(*e));
	if (!e)
		return aql_fail(AQL_ERR_NOMEM, "offload bundle of %llu entries: out of memory",
				(unsigned long long)want);
	b->entries = e;
	b->cap = (uint32_t)cap;
	return AQL_OK;
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

/*
 * Append the entries of the plain bundle at p (size bytes from its start to
 * the end of the input) to b, as part part. *end: where its headers and
 * entries end.
 */
static aql_status open_plain(aql_bundle *b, const uint8_t *p, size_t size, uint32_t part,
			     size_t *end)
{
	uint64_t count, pos, ids_len = 0, last;
	aql_bundle_entry *first;
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
	if ((st = reserve(b, count)) != AQL_OK)
		return st;
	ids = malloc(ids_len ? ids_len : 1);
	if (!ids)
		return aql_fail(AQL_ERR_NOMEM, "offload bundle of %llu entries: out of memory",
				(unsigned long long)count);
	if ((st = own(b, ids)) != AQL_OK)
		return st;
	/* Second pass: entries' data, which must lie after the headers. An
	 * empty bundle may have reserved no entries at all. */
	first = count ? b->entries + b->count : NULL;
	last = pos;
	for (uint64_t i = 0, at = HEADER_LEN; i < count; i++) {
		uint64_t off = get_u64(p + at), len = get_u64(p + at + 8);
		uint64_t id_len = get_u64(p + at + 16);
		aql_bundle_entry *e = &first[i];

		memset(e, 0, sizeof(*e));
		memcpy(ids, p + at + ENTRY_HEADER_LEN, id_len);
		ids[id_len] = '\0';
		e->id = ids;
		ids += id_len + 1;
		at += ENTRY_HEADER_LEN + id_len;
		if (off < pos || off > size || len > size - off)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"bundle entry \"%s\": bytes %llu+%llu lie outside the "
					"data area %llu-%zu", e->id, (unsigned long long)off,
					(unsigned long long)len, (unsigned long long)pos, size);
		e->data = p + off;
		e->size = (size_t)len;
		e->part = part;
		describe(e);
		if (off + len > last)
			last = off + len;
	}
	st = check_entries(first, (uint32_t)count, p);
	if (st != AQL_OK)
		return st;
	b->count += (uint32_t)count;
	*end = (size_t)last;
	return AQL_OK;
}

static aql_status inflate_zlib(uint8_t *dst, uint64_t raw_size, const uint8_t *src,
			       size_t avail, size_t *used, unsigned version)
{
	uLongf got = (uLongf)raw_size;
	uLong in = (uLong)avail;
	int rc = uncompress2(dst, &got, src, &in);

	if (rc == Z_BUF_ERROR)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zlib stream holds more "
				"than the %llu bytes its uncompressed size field gives",
				version, (unsigned long long)raw_size);
	if (rc != Z_OK)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zlib stream is corrupt "
				"or truncated (%s)", version, zError(rc));
	if (got != raw_size)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zlib stream holds %llu "
				"bytes, its uncompressed size field says %llu", version,
				(unsigned long long)got, (unsigned long long)raw_size);
	*used = (size_t)in;
	return AQL_OK;
}

static aql_status inflate_zstd(uint8_t *dst, uint64_t raw_size, const uint8_t *src,
			       size_t avail, size_t *used, unsigned version)
{
	size_t frame = ZSTD_findFrameCompressedSize(src, avail), got;
	unsigned long long content;

	if (ZSTD_isError(frame))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zstd frame is corrupt "
				"or truncated (%s)", version, ZSTD_getErrorName(frame));
	content = ZSTD_getFrameContentSize(src, frame);
	if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != raw_size)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zstd frame holds %llu "
				"bytes, its uncompressed size field says %llu", version, content,
				(unsigned long long)raw_size);
	got = ZSTD_decompress(dst, (size_t)raw_size, src, frame);
	if (ZSTD_isError(got))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zstd frame does not "
				"decompress into its %llu-byte uncompressed size (%s)", version,
				(unsigned long long)raw_size, ZSTD_getErrorName(got));
	if (got != raw_size)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): the zstd frame holds %zu "
				"bytes, its uncompressed size field says %llu", version, got,
				(unsigned long long)raw_size);
	*used = frame;
	return AQL_OK;
}

/*
 * Decompress the CCOB bundle at p (size bytes to the end of the input) and
 * append the entries of the bundle inside as part part. *end: where the
 * compressed bundle ends.
 */
static aql_status open_compressed(aql_bundle *b, const uint8_t *p, size_t size,
				  uint32_t part, size_t *end)
{
	uint64_t file_size = 0, raw_size;
	uint16_t version, method;
	size_t header, avail, used = 0, inner;
	char where[48];
	aql_status st;
	uint8_t *raw;

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
				"compressed offload bundle: CCOB version %u (method %u) is not "
				"one aql reads (1 to 3)", version, method);
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
	if (version >= 2 && (file_size <= header || file_size > size))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): file size field %llu is "
				"outside %zu-%zu (its header to the bytes present)", version,
				(unsigned long long)file_size, header + 1, size);
	if (method > 1)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"compressed offload bundle (CCOB v%u): compression method %u is "
				"neither zlib (0) nor zstd (1)", version, method);
	if (raw_size < HEADER_LEN)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): uncompressed size field %llu "
				"cannot hold an offload bundle", version, (unsigned long long)raw_size);
	if (raw_size > MAX_DECOMPRESSED - b->decompressed)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u): uncompressed size field %llu "
				"is past the %llu-byte limit on what one input's compressed "
				"bundles expand to (%llu used before it)", version,
				(unsigned long long)raw_size, MAX_DECOMPRESSED,
				(unsigned long long)b->decompressed);
	avail = version >= 2 ? (size_t)file_size - header : size - header;
	raw = malloc((size_t)raw_size);
	if (!raw)
		return aql_fail(AQL_ERR_NOMEM, "compressed offload bundle (CCOB v%u): %llu bytes "
				"to decompress into", version, (unsigned long long)raw_size);
	if ((st = own(b, raw)) != AQL_OK)
		return st;
	b->decompressed += raw_size;
	st = method == 0 ? inflate_zlib(raw, raw_size, p + header, avail, &used, version)
			 : inflate_zstd(raw, raw_size, p + header, avail, &used, version);
	if (st != AQL_OK)
		return st;
	if (memcmp(raw, MAGIC, MAGIC_LEN))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"compressed offload bundle (CCOB v%u, %s): the %llu decompressed "
				"bytes are not an offload bundle", version, method ? "zstd" : "zlib",
				(unsigned long long)raw_size);
	st = open_plain(b, raw, (size_t)raw_size, part, &inner);
	if (st != AQL_OK) {
		snprintf(where, sizeof(where), "inside compressed offload bundle (CCOB v%u)",
			 version);
		return aql_fail_prefix(st, where);
	}
	*end = version >= 2 ? (size_t)file_size : header + used;
	return AQL_OK;
}

/* One bundle, plain or compressed, at p; size bytes to the end of the input. */
static aql_status open_one(aql_bundle *b, const uint8_t *p, size_t size, uint32_t part,
			   size_t *end)
{
	if (size >= 4 && !memcmp(p, CCOB_MAGIC, 4))
		return open_compressed(b, p, size, part, end);
	if (size < MAGIC_LEN || memcmp(p, MAGIC, MAGIC_LEN))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"not an offload bundle: %zu bytes without the "
				"\"" MAGIC "\" magic", size);
	return open_plain(b, p, size, part, end);
}

/* Every bundle of a .hip_fatbin section, zero padding between them. */
static aql_status open_section(aql_bundle *b, const uint8_t *p, size_t size)
{
	char where[96];
	size_t pos = 0, end;
	aql_status st;

	while (pos < size) {
		if (!p[pos]) {
			pos++;
			continue;
		}
		if (!aql_bundle_is_bundle(p + pos, size - pos)) {
			if (!b->parts)
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						".hip_fatbin section (%zu bytes) does not start with "
						"an offload bundle", size);
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					".hip_fatbin section: bytes at offset %zu, after bundle "
					"%u, are neither zero padding nor an offload bundle",
					pos, b->parts - 1);
		}
		st = open_one(b, p + pos, size - pos, b->parts, &end);
		if (st != AQL_OK) {
			snprintf(where, sizeof(where), ".hip_fatbin bundle %u at offset %zu",
				 b->parts, pos);
			return aql_fail_prefix(st, where);
		}
		b->parts++;
		pos += end;
	}
	if (!b->parts)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				".hip_fatbin section (%zu bytes) holds only zero bytes, no offload "
				"bundle", size);
	return AQL_OK;
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
	aql_bundle *b;
	aql_status st;
	size_t end;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_bundle_open: out is NULL");
	*out = NULL;
	if (!data)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_bundle_open: data is NULL");
	b = calloc(1, sizeof(*b));
	if (!b)
		return aql_fail(AQL_ERR_NOMEM, "offload bundle: out of memory");
	if (size >= 4 && !memcmp(p, "\x7f" "ELF", 4)) {
		st = find_fatbin(p, size, &p, &size);
		if (st == AQL_OK)
			st = open_section(b, p, size);
	} else {
		st = open_one(b, p, size, 0, &end);
		b->parts = 1;
	}
	if (st != AQL_OK) {
		aql_bundle_close(b);
		return st;
	}
	*out = b;
	return AQL_OK;
}

void aql_bundle_close(aql_bundle *bundle)
{
	if (!bundle)
		return;
	for (uint32_t i = 0; i < bundle->owned_count; i++)
		free(bundle->owned[i]);
	free(bundle->owned);
	free(bundle->entries);
	free(bundle);
}

uint32_t aql_bundle_count(const aql_bundle *bundle)
{
	return bundle ? bundle->count : 0;
}

uint32_t aql_bundle_part_count(const aql_bundle *bundle)
{
	return bundle ? bundle->parts : 0;
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

aql_status aql_bundle_select_part(const aql_bundle *bundle, uint32_t part,
				  const aql_target_id *agent, const aql_bundle_entry **out)
{
	const aql_bundle_entry *best = NULL;
	char want[64], list[400];
	size_t used = 0;
	uint32_t listed = 0;
	int best_rank = -1;

	if (!bundle || !agent || !out)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_bundle_select: bundle, agent or out is NULL");
	*out = NULL;
	if (part >= bundle->parts)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_bundle_select_part: part %u of a %u-part bundle",
				part, bundle->parts);
	for (uint32_t i = 0; i < bundle->count; i++) {
		const aql_bundle_entry *e = &bundle->entries[i];
		int r;

		if (e->part != part || !e->is_amdgcn || !aql_target_dispatchable(&e->target) ||
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
	for (uint32_t i = 0; i < bundle->count; i++) {
		int n;

		if (bundle->entries[i].part != part)
			continue;
		if (used < sizeof(list) - 1) {
			n = snprintf(list + used, sizeof(list) - used, "%s%s",
				     listed ? ", " : "", bundle->entries[i].id);
			if (n > 0)
				used += (size_t)n < sizeof(list) - used ? (size_t)n
					: sizeof(list) - used - 1;
		}
		listed++;
	}
	aql_target_format(agent, want, sizeof(want));
	return aql_fail(AQL_ERR_NOT_FOUND,
			"no bundle entry runs on %s; the bundle holds %u: %s",
			want, listed, listed ? list : "(nothing)");
}

aql_status aql_bundle_select(const aql_bundle *bundle, const aql_target_id *agent,
			     const aql_bundle_entry **out)
{
	return aql_bundle_select_part(bundle, 0, agent, out);
}
