# The flusher killed with SIGKILL in the middle of a load.
#
# The postmaster restarts everything after the crash. A buffered value then is at least what the
# last rollup had written before the kill, and at most the number of increments issued: a crash
# may lose the increments since the last flush but never counts one twice. Increments work again
# afterwards, and the flusher comes back.
#
# Each pgbench transaction logs the value its increment returned in a plain table, so after the
# crash the committed log rows are a lower bound of the increments issued, and the log rows plus
# one in-flight increment per client an upper bound. The load is sized far beyond what it makes
# before the kill (100,000 increments; the kill follows the first few thousand and some flushes).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $clients = 4;

# The flusher stays (idle_timeout = 0): by default it leaves after 2 s without a client, which a
# busy machine can reach before the load connects, and the pid read below would be gone.
my $node = preloaded_node('worker_kill', qq{
slotted_counter.flush_interval = 100
slotted_counter.idle_timeout = 0
restart_after_crash = on
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
CREATE TABLE issued (v bigint NOT NULL);
});

my $flusher_query = q{
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'};
my $rolled_up_query = q{
SELECT coalesce(max(t.value), 0)
FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE c.name = 'c' AND t.key = 1};

ok($node->poll_query_until('postgres', "SELECT ($flusher_query) = 1"),
	'the flusher runs');
my $worker_pid = $node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity
WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'});
is( $node->safe_psql(
		'postgres',
		q{SELECT worker_pid FROM slotted_counter.stats WHERE datname = 'postgres'}),
	$worker_pid,
	'stats shows the flusher pid that pg_stat_activity shows');

my $script = $node->basedir . '/incr.sql';
append_to_file($script, "INSERT INTO issued SELECT sc_incr('c', 1, 1);\n");
my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', "--client=$clients", '--jobs=2', '--transactions=25000',
		"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

# Let the load run and the flusher write a few times, then roll up and remember what the table
# holds; the kill follows at once, while pgbench keeps incrementing.
my $flushes_query =
  q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()};
my $flushes_before = $node->safe_psql('postgres', $flushes_query);
ok( $node->poll_query_until(
		'postgres', 'SELECT count(*) >= 3000 FROM issued'),
	'the load is running');
ok( $node->poll_query_until(
		'postgres', "SELECT ($flushes_query) >= $flushes_before + 3"),
	'the flusher flushed during the load');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
my $rolled_up = $node->safe_psql('postgres', $rolled_up_query);
ok($rolled_up > 0, "a rollup wrote $rolled_up before the kill");

my $log_offset = -s $node->logfile;
ok(kill('KILL', $worker_pid), 'SIGKILL sent to the flusher');

$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
eval { $pgbench->finish; };
isnt($pgbench->result, 0, 'pgbench was cut off by the crash, mid-load');
note "pgbench stdout:\n$out\npgbench stderr:\n$err";

ok($node->poll_query_until('postgres', 'SELECT true'),
	'the server accepts connections after the crash restart');

my $issued = $node->safe_psql('postgres', 'SELECT count(*) FROM issued');
my $value = $node->safe_psql('postgres', q{SELECT sc_sum('c', 1)});
my $upper = $issued + $clients;
note "rolled up $rolled_up, value $value, committed increments $issued";
ok($value >= $rolled_up,
	"value after the crash ($value) >= last rolled-up value ($rolled_up)");
ok($value <= $upper,
	"value after the crash ($value) <= increments issued (at most $upper)");
is( $node->safe_psql('postgres',
		'SELECT count(*) = count(DISTINCT v) FROM issued'),
	't',
	'no two increments before the crash returned the same value');

is($node->safe_psql('postgres', q{SELECT sc_incr('c', 1, 1)}),
	$value + 1, 'increments work again after the crash restart');
is($node->safe_psql('postgres', q{SELECT sc_incr('c', 2, 5)}),
	'5', 'a new key counts from zero after the crash restart');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $rolled_up_query),
	$value + 1, 'a rollup after the crash writes the exact value');

ok($node->poll_query_until('postgres', "SELECT ($flusher_query) = 1"),
	'the flusher runs again after the crash restart');
isnt(
	$node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity
WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'}),
	$worker_pid,
	'it is a new process');

$node->stop;
done_testing();
