/*
 * key_file.h — the byte format of an export of a table's keys, the same
 * for a server file (cpht_export_file, cpht_import_file) and for the rows
 * of a stream (cpht_export, cpht_import_agg), whose chunks concatenated in
 * seq order are the file byte for byte:
 *
 *   header, 64 bytes:   "CPHTKEYS", version (uint32), header size (uint32),
 *                       key count (uint64), key_bits, kind and device of
 *                       the table it came from (uint32 each; key_bits 0
 *                       for a table that followed its keys' width), zeros
 *   keys:               key count × 8 bytes
 *   trailer, 16 bytes:  "CPHT_END", CRC-32C (uint32) of the header and the
 *                       keys, 4 zero bytes
 *
 * Every integer, the keys included, is little-endian.
 */
#ifndef CPHT_KEY_FILE_H
#define CPHT_KEY_FILE_H

#include "port/pg_crc32c.h"

#include "cpht_table.h"

#define CPHT_KEY_FILE_VERSION 1
#define CPHT_KEY_FILE_HEADER 64
#define CPHT_KEY_FILE_TRAILER 16

typedef struct CphtKeyFileHeader
{
	uint32		version;
	uint64		count;
	int			key_bits;
	cpht_kind	kind;
	cpht_device device;
} CphtKeyFileHeader;

/* The 64 header bytes of h (version CPHT_KEY_FILE_VERSION). */
extern void cpht_key_file_header_write(const CphtKeyFileHeader *h, uint8 *out);

/*
 * Parses 64 header bytes: ERROR 22P03 when they are no cpht key export,
 * 0A000 for another format version, XX001 for a damaged header.  `source`
 * names the file or stream in messages.
 */
extern void cpht_key_file_header_read(const uint8 *in, CphtKeyFileHeader *h,
									  const char *source);

/* Bytes of a whole export of count keys; ERROR XX001 when impossible. */
extern uint64 cpht_key_file_size(uint64 count, const char *source);

extern void cpht_key_file_trailer_write(pg_crc32c crc, uint8 *out);

/* ERROR XX001 unless the trailer is intact and carries crc. */
extern void cpht_key_file_trailer_check(const uint8 *in, pg_crc32c crc, const char *source);

/* Keys to and from their little-endian bytes. */
extern void cpht_key_file_encode(const uint64 *keys, size_t n, uint8 *out);
extern void cpht_key_file_decode(const uint8 *in, size_t n, uint64 *keys);

#endif							/* CPHT_KEY_FILE_H */
