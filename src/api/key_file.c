/*
 * key_file.c — the byte format of an export of keys (key_file.h).
 */
#include "postgres.h"

#include "port/pg_bswap.h"

#include "api/key_file.h"

static const char header_magic[8] = {'C', 'P', 'H', 'T', 'K', 'E', 'Y', 'S'};
static const char trailer_magic[8] = {'C', 'P', 'H', 'T', '_', 'E', 'N', 'D'};

static inline uint64
to_le64(uint64 v)
{
#ifdef WORDS_BIGENDIAN
	return pg_bswap64(v);
#else
	return v;
#endif
}

static inline uint32
to_le32(uint32 v)
{
#ifdef WORDS_BIGENDIAN
	return pg_bswap32(v);
#else
	return v;
#endif
}

static void
put32(uint8 *at, uint32 v)
{
	v = to_le32(v);
	memcpy(at, &v, 4);
}

static void
put64(uint8 *at, uint64 v)
{
	v = to_le64(v);
	memcpy(at, &v, 8);
}

static uint32
get32(const uint8 *at)
{
	uint32		v;

	memcpy(&v, at, 4);
	return to_le32(v);
}

static uint64
get64(const uint8 *at)
{
	uint64		v;

	memcpy(&v, at, 8);
	return to_le64(v);
}

void
cpht_key_file_header_write(const CphtKeyFileHeader *h, uint8 *out)
{
	memset(out, 0, CPHT_KEY_FILE_HEADER);
	memcpy(out, header_magic, 8);
	put32(out + 8, CPHT_KEY_FILE_VERSION);
	put32(out + 12, CPHT_KEY_FILE_HEADER);
	put64(out + 16, h->count);
	put32(out + 24, (uint32) h->key_bits);
	put32(out + 28, (uint32) h->kind);
	put32(out + 32, (uint32) h->device);
}

static void
damaged(const char *source, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("cpht key export %s is damaged", source),
			 errdetail("%s", why)));
}

void
cpht_key_file_header_read(const uint8 *in, CphtKeyFileHeader *h, const char *source)
{
	uint32		kind,
				device,
				bits;

	if (memcmp(in, header_magic, 8) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("%s is not a cpht key export", source),
				 errdetail("It does not begin with the bytes \"CPHTKEYS\"."),
				 errhint("Read files written by cpht_export_file() or the rows of cpht_export(), in seq order.")));
	h->version = get32(in + 8);
	if (h->version != CPHT_KEY_FILE_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cpht key export %s has format version %u", source, h->version),
				 errdetail("This version of cpht reads format version %d only.", CPHT_KEY_FILE_VERSION),
				 errhint("Import it with the cpht version that exported it, or a later one.")));
	if (get32(in + 12) != CPHT_KEY_FILE_HEADER)
		damaged(source, "Its header size is wrong.");
	h->count = get64(in + 16);
	bits = get32(in + 24);
	kind = get32(in + 28);
	device = get32(in + 32);
	/* key_bits 0: the table followed its keys' width (no key_bits given) */
	if ((bits != 0 && bits < 8) || bits > 64 || kind > CPHT_CUCKOO || device > CPHT_DEVICE_GPU)
		damaged(source, "Its header names no possible table.");
	for (int i = 36; i < CPHT_KEY_FILE_HEADER; i++)
		if (in[i] != 0)
			damaged(source, "Its header has bytes set that must be zero.");
	h->key_bits = (int) bits;
	h->kind = (cpht_kind) kind;
	h->device = (cpht_device) device;
}

uint64
cpht_key_file_size(uint64 count, const char *source)
{
	if (count > (PG_UINT64_MAX - CPHT_KEY_FILE_HEADER - CPHT_KEY_FILE_TRAILER) / sizeof(uint64))
		damaged(source, "Its header announces more keys than any table holds.");
	return CPHT_KEY_FILE_HEADER + count * sizeof(uint64) + CPHT_KEY_FILE_TRAILER;
}

void
cpht_key_file_trailer_write(pg_crc32c crc, uint8 *out)
{
	memset(out, 0, CPHT_KEY_FILE_TRAILER);
	memcpy(out, trailer_magic, 8);
	put32(out + 8, (uint32) crc);
}

void
cpht_key_file_trailer_check(const uint8 *in, pg_crc32c crc, const char *source)
{
	if (memcmp(in, trailer_magic, 8) != 0 || get32(in + 12) != 0)
		damaged(source, "It does not end with an intact trailer after the keys its header announces.");
	if (get32(in + 8) != (uint32) crc)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("cpht key export %s is damaged", source),
				 errdetail("Its CRC-32C is %08X, but its header and keys give %08X.",
						   get32(in + 8), (uint32) crc)));
}

void
cpht_key_file_encode(const uint64 *keys, size_t n, uint8 *out)
{
#ifdef WORDS_BIGENDIAN
	for (size_t i = 0; i < n; i++)
		put64(out + i * 8, keys[i]);
#else
	memcpy(out, keys, n * sizeof(uint64));
#endif
}

void
cpht_key_file_decode(const uint8 *in, size_t n, uint64 *keys)
{
#ifdef WORDS_BIGENDIAN
	for (size_t i = 0; i < n; i++)
		keys[i] = get64(in + i * 8);
#else
	memcpy(keys, in, n * sizeof(uint64));
#endif
}
