# Without shared_preload_libraries, the extension installs but every function fails with 55000
# and a hint that names the setting; nothing is half-created.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# (Its statement timeout; the node is made here, without the library preloaded.)
use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = PostgreSQL::Test::Cluster->new('not_preloaded');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION slotted_counter');

my @calls = (
	"SELECT sc_create('c', 'buffered')",
	"SELECT sc_incr('c')",
	"SELECT sc_sum('c')",
	"SELECT sc_drop('c')",
	"SELECT sc_rollup()",
	"SELECT * FROM slotted_counter.stats",
	"SELECT 1::slotted_counter",);
foreach my $sql (@calls)
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\n$sql");
	isnt($ret, 0, "fails: $sql");
	like($stderr, qr/ERROR:  55000: slotted_counter must be loaded via "shared_preload_libraries"/,
		"SQLSTATE 55000: $sql");
	like($stderr, qr/HINT:  Add slotted_counter to shared_preload_libraries/,
		"hint names the setting: $sql");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM slotted_counter.counters'),
	'0', 'no counter was created');
# A name is only a value until a call uses it: it needs no shared memory.
is($node->safe_psql('postgres', "SELECT 'c'::slotted_counter"), 'c', 'a name is a value');

# Once preloaded, the same database works.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'slotted_counter'");
$node->restart;
is($node->safe_psql('postgres',
		"SELECT sc_create('c', 'buffered'); SELECT sc_incr('c'); SELECT sc_incr('c')"),
	"c\n1\n2", 'works after preloading');

$node->stop;
done_testing();
