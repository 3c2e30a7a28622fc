# Commands on a whole database that counts, as test runners and DBAs issue them, with no manual
# step: DROP DATABASE (plain, and WITH (FORCE) while a client is connected) frees the database's
# slot and buffer entries, so 100 create/count/drop cycles run with 4 slots; CREATE DATABASE ...
# TEMPLATE copies every value, buffered ones included; ALTER DATABASE ... RENAME and ... SET
# TABLESPACE work on a counting database.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# Flushes only when asked (or when the flusher leaves): a copy holds buffered values only if the
# flusher flushed them for it. Four slots: without freeing them, the fifth database would fail.
# A flusher leaves only when another database asks for its slot, never for being idle (the
# default leaves after 2 s without a client: on a busy machine, between two of the steps below).
my $node = preloaded_node('databases',
	"slotted_counter.flush_interval = 0\nslotted_counter.max_databases = 4\n"
	  . "slotted_counter.idle_timeout = 0\n");

# Counts in database $db: a buffered and a transactional counter, $n increments each.
sub count_in
{
	my ($db, $n) = @_;
	$node->safe_psql($db, qq{
CREATE EXTENSION IF NOT EXISTS slotted_counter;
SELECT sc_create('b', 'buffered', if_not_exists => true), sc_create('t', if_not_exists => true);
SELECT count(sc_incr('b', 1)) + count(sc_incr('t', 1)) FROM generate_series(1, $n);});
}

my $cycles_ok = 0;
for my $i (1 .. 50)
{
	$node->safe_psql('postgres', "CREATE DATABASE plain_$i");
	count_in("plain_$i", 3);
	my ($rc, $out, $err) = $node->psql('postgres', "DROP DATABASE plain_$i");
	if ($rc != 0)
	{
		diag("cycle $i: $err");
		last;
	}
	$cycles_ok++;
}
is($cycles_ok, 50, '50 create, count, DROP DATABASE cycles, each drop at once');

$cycles_ok = 0;
for my $i (1 .. 50)
{
	$node->safe_psql('postgres', "CREATE DATABASE forced_$i");
	count_in("forced_$i", 3);
	# A client still connected, in a transaction that counted.
	my $client = $node->background_psql("forced_$i");
	$client->query_safe(q{BEGIN; SELECT sc_incr('t', 2)});
	my ($rc, $out, $err) = $node->psql('postgres', "DROP DATABASE forced_$i WITH (FORCE)");
	$client->quit;
	if ($rc != 0)
	{
		diag("cycle $i: $err");
		last;
	}
	$cycles_ok++;
}
is($cycles_ok, 50, '50 cycles with DROP DATABASE ... WITH (FORCE) while a client is connected');

is( $node->safe_psql('postgres', q{
SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'slotted_counter%'}),
	'0', 'no flusher or attacher is left');

# Slots and buffer entries were given back: four databases count at once.
for my $i (1 .. 4)
{
	$node->safe_psql('postgres', "CREATE DATABASE after_$i");
	count_in("after_$i", 10);
}
is($node->safe_psql('after_4', q{SELECT sc_sum('b', 1), sc_sum('t', 1)}),
	'10|10', 'four new databases count, in the four slots');
is( $node->safe_psql('after_1', q{
SELECT count(*), max(entries_used) FROM slotted_counter.stats}),
	'4|12', 'the stats show only them, and the buffer holds their two entries each, and the buffered key\'s sum entry');

# A copy of a counting database holds every value, the buffered ones too (flush_interval = 0:
# only the flusher's last flush before the copy can have written them).
$node->safe_psql('after_1', q{SELECT sc_incr('b', 1, 5), sc_incr('t', 1, 5)});
is( $node->safe_psql('after_1', q{
SELECT count(*) FROM slotted_counter.key_values WHERE counter = 'b'::slotted_counter::integer}),
	'0', 'before the copy, the buffered value is not in the table');
my ($rc, $out, $err) = $node->psql('postgres', 'CREATE DATABASE copy_1 TEMPLATE after_1');
is($rc, 0, 'CREATE DATABASE ... TEMPLATE of a counting database') or diag($err);
is($node->safe_psql('copy_1', q{SELECT sc_sum('b', 1), sc_sum('t', 1)}),
	'15|15', 'the copy holds every value');
is($node->safe_psql('after_1', q{SELECT sc_incr('b', 1), sc_incr('t', 1)}),
	'16|16', 'the original goes on counting');

# Rename and move.
my $dir = $node->basedir . '/moved';
mkdir $dir or die "mkdir $dir: $!";
$node->safe_psql('postgres', "CREATE TABLESPACE moved LOCATION '$dir'");
($rc, $out, $err) = $node->psql('postgres', 'ALTER DATABASE after_2 RENAME TO renamed_2');
is($rc, 0, 'ALTER DATABASE ... RENAME of a counting database') or diag($err);
($rc, $out, $err) = $node->psql('postgres', 'ALTER DATABASE renamed_2 SET TABLESPACE moved');
is($rc, 0, 'ALTER DATABASE ... SET TABLESPACE of a counting database') or diag($err);
is($node->safe_psql('renamed_2', q{SELECT sc_incr('b', 1), sc_incr('t', 1)}),
	'11|11', 'it keeps its values and counts on');

# A command that fails (a client is connected) leaves the database counting.
my $client = $node->background_psql('after_3');
my $started = time;
($rc, $out, $err) = $node->psql('postgres', 'DROP DATABASE after_3');
note('the failing DROP DATABASE took ' . (time - $started) . ' s (PostgreSQL waits 5 s)');
isnt($rc, 0, 'DROP DATABASE fails while a client is connected');
like($err, qr/being accessed by other users/, 'as PostgreSQL says');
is($client->query_safe(q{SELECT sc_incr('b', 1), sc_incr('t', 1)}), '11|11',
	'the connected client counts on, its flusher started again');
$client->quit;
is($node->safe_psql('after_3', q{SELECT sc_rollup() >= 0}), 't', 'and flushes');

$node->stop;
done_testing();
