/*
 * export.h — export and import of a table's keys (export.c, import.c).
 */
#ifndef CPHT_EXPORT_H
#define CPHT_EXPORT_H

/* ERROR 42501 unless the role has the privileges of pg_write_server_files
 * (write) or pg_read_server_files (read); superusers have them. */
extern void cpht_key_file_check_role(bool write);

/* 42602 unless path is absolute: as COPY to a file, cpht_export_file and
 * cpht_import_file never resolve a path against the data directory. */
extern void cpht_key_file_check_path(const char *path, bool write);

#endif							/* CPHT_EXPORT_H */
