# pg_upgrade of a cluster that counts: the counters, their values, their guards' owners and grants
# come through (pg_upgrade dumps the schema with --binary-upgrade and copies the data files), so
# after the upgrade the reader still reads, the owner still writes and drops, and DROP ROLE of the
# owner is still refused. The same major version on both sides: the test command installs one
# PostgreSQL per run, and what is checked here (the guards as catalog objects, the extension's
# tables as data) does not depend on the versions.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $old = preloaded_node('upgrade_old', "slotted_counter.flush_interval = 100\n");
$old->safe_psql('postgres', q{
CREATE ROLE app LOGIN;
CREATE ROLE reader LOGIN;
GRANT CREATE ON DATABASE postgres TO app;
CREATE EXTENSION slotted_counter;
});
$old->safe_psql('postgres', q{
SELECT sc_create('views', 'buffered');
SELECT sc_create('sales');
SELECT sc_grant('views', 'SELECT', 'reader');
SELECT sc_incr('views', 1, 41);
SELECT sc_incr('sales', 2, 7);
}, extra_params => [ '-U', 'app' ]);
$old->safe_psql('postgres', 'SELECT sc_rollup()');
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('upgrade_new');
$new->init;
$new->append_conf('postgresql.conf',
	"shared_preload_libraries = 'slotted_counter'\nslotted_counter.flush_interval = 100\n");

# pg_upgrade writes its logs into the current directory: the test's own.
my $cwd = $new->basedir;
chdir $cwd or die "chdir $cwd: $!";
command_ok(
	[
		'pg_upgrade', '--no-sync', '-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	'pg_upgrade of a cluster with counters');
$new->start;

is( $new->safe_psql(
		'postgres', q{SELECT relname || ' ' || relowner::regrole || ' ' || coalesce(relacl::text, '-')
		              FROM pg_class WHERE relnamespace = 'slotted_counters'::regnamespace
		              ORDER BY relname}),
	"sales app -\nviews app {app=rwU/app,reader=r/app}",
	'the guards came through with their owner and grants');
is($new->safe_psql('postgres', q{SELECT sc_sum('views', 1)}, extra_params => [ '-U', 'reader' ]),
	'41', 'the reader reads the value counted before the upgrade');
my ($rc, $out, $err) =
  $new->psql('postgres', q{SELECT sc_sum('sales', 2)}, extra_params => [ '-U', 'reader' ]);
like($err, qr/permission denied for counter "sales"/, 'and still may not read the other counter');
($rc, $out, $err) = $new->psql('postgres', 'DROP ROLE app');
like($err, qr/owner of sequence slotted_counters\.views/,
	'DROP ROLE of the owner is refused, naming the counter');
is( $new->safe_psql(
		'postgres', q{SELECT sc_incr('views', 1, 1), sc_sum('sales', 2); SELECT sc_drop('sales')},
		extra_params => [ '-U', 'app' ]),
	"42|7\n", 'the owner writes, reads and drops its counters');

$new->stop;
done_testing();
