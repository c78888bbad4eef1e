# Creating and dropping a shared table leaves a LOG line naming the table,
# its database and the role, and whether it is durable (dropping a durable
# table discards its keys for good): they are function calls, which
# log_statement = ddl does not see.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CphtTest;

my $node = cpht_node('table_log');
$node->safe_psql('postgres', q{
	CREATE ROLE cpht_logged LOGIN;
	GRANT CREATE ON DATABASE postgres TO cpht_logged;
});

my $offset = -s $node->logfile;
$node->safe_psql('postgres', q{
	SET ROLE cpht_logged;
	SELECT cpht_create(1000, name => 'logged_shared');
	SELECT cpht_create(1000, name => 'logged_durable', durable => true);
});
$node->safe_psql('postgres', q{
	SET ROLE cpht_logged;
	SELECT cpht_drop(cpht_open('logged_shared'));
	SELECT cpht_drop(cpht_open('logged_durable'));
});
my $log = substr(slurp_file($node->logfile), $offset);

like($log,
	qr/LOG:  shared cpht table "logged_shared" created in database "postgres" by role "cpht_logged"/,
	'creating a shared table is logged');
like($log,
	qr/LOG:  durable shared cpht table "logged_durable" created in database "postgres" by role "cpht_logged"/,
	'creating a durable table is logged as durable');
like($log,
	qr/LOG:  shared cpht table "logged_shared" dropped in database "postgres" by role "cpht_logged"/,
	'dropping a shared table is logged');
like($log,
	qr/LOG:  durable shared cpht table "logged_durable" dropped in database "postgres" by role "cpht_logged"\n(?:.*\n)?.*DETAIL:  Its keys, snapshot and WAL are gone for good\./,
	'dropping a durable table is logged, saying its keys are gone');

$node->stop;
done_testing();
