/*
 * cpht.h — settings shared by the PostgreSQL side of cpht.
 */
#ifndef CPHT_H
#define CPHT_H

/* Values of the cpht.device setting. */
typedef enum CphtDeviceSetting
{
	CPHT_SETTING_AUTO = 0,
	CPHT_SETTING_GPU,
	CPHT_SETTING_CPU
} CphtDeviceSetting;

extern int	cpht_device_setting;
extern int	cpht_cpu_threads;
extern int	cpht_max_memory_kb;
extern bool cpht_trace;
extern bool cpht_grow;
extern int	cpht_shards;

extern void _PG_init(void);

#endif							/* CPHT_H */
