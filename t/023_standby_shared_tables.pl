# Sessions of a standby have shared tables of their own (not durable):
# cpht_create(name => ...) and cpht_drop() work there (the standby writes
# no row of cpht_shared_tables, which is the primary's), and a name freed
# by a drop can be taken again; cpht_fop_agg over a whole table fills one
# there through cpht_fop_relation's parallel scan.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $primary = cpht_node('primary');
$primary->safe_psql('postgres', 'CREATE TABLE sb_src AS SELECT g::bigint AS id FROM generate_series(1, 50000) g');
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->start;
cpht_wait_worker($standby);
my ($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_create(1000, name => 'local') > 0");
note("cpht_create on the standby: rc $rc, $err");
is($rc, 0, 'a named shared table can be created on a standby');
($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_create(1000, name => 'local') > 0");
note("again: rc $rc, $err");
# cpht_fop_agg over a whole table of the standby, planned as
# cpht_fop_relation, whose scan runs in parallel workers there too (into
# a table that is not transactional: a standby assigns no transaction ids)
my $parallel = cpht_parallel_settings(2, '60s') =~ s/SET cpht.fop_agg_relation_scan = off;//r;
$standby->safe_psql('postgres', "SELECT cpht_create(100000, name => 'sb_fill', transactional => false)");
like($standby->safe_psql('postgres', "$parallel EXPLAIN (COSTS OFF) SELECT cpht_fop_agg('sb_fill', id) FROM sb_src"),
	qr/cpht call/, 'on a standby cpht_fop_agg over a whole table is planned as one call');
($rc, $out, $err) = $standby->psql('postgres', "$parallel SELECT cpht_fop_agg('sb_fill', id) FROM sb_src");
note("cpht_fop_agg on the standby: rc $rc, $err");
is($out, '50000', "... which puts the keys of the primary's table into the standby's shared table");
is($standby->safe_psql('postgres', "SELECT cpht_count('sb_fill')"), '50000', '... all of them');
$standby->safe_psql('postgres', "SELECT cpht_drop(cpht_open('sb_fill'))");
($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_drop(cpht_open('local'))");
note("cpht_drop on the standby: rc $rc, $err");
is($rc, 0, 'a shared table can be dropped on a standby');
$standby->stop;
done_testing();
