# Sessions of a standby have shared tables of their own (not durable):
# cpht_create(name => ...) and cpht_drop() work there (the standby writes
# no row of cpht_shared_tables, which is the primary's), and a name freed
# by a drop can be taken again.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $primary = cpht_node('primary');
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
($rc, $out, $err) = $standby->psql('postgres', "SELECT cpht_drop(cpht_open('local'))");
note("cpht_drop on the standby: rc $rc, $err");
is($rc, 0, 'a shared table can be dropped on a standby');
$standby->stop;
done_testing();
