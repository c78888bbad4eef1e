/* cpht 0.3 -> 0.4 */
\echo Use "ALTER EXTENSION cpht UPDATE TO '0.4'" to load this file. \quit

-- Each change below has its own headed section.
