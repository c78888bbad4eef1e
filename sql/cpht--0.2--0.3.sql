/* cpht 0.2 -> 0.3: privileges, quotas and safe defaults */
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.3'" to load this file. \quit

