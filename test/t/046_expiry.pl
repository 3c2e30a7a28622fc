# Expiry exact on read (a key of an unbucketed counter whose last write was `retain` ago or more
# reads 0 and counts again from 0, deleted or not) across everything that moves a key's value
# and its last-write time between the buffer and the table. The flusher runs only when asked
# (flush_interval = 0), so a key reads 0 because its time says so, not because a pass deleted it.
# Expired cases sleep past a short retention before the event (restart, crash, eviction, dump),
# so that a time taken at the event instead of the write would leave the key alive when read just
# after it; what must stay is read under a retention of 1 hour.
#   a. clean restart: keys idle past their retention read 0 after it (sc_sum, sc_sum_keys, sc_top,
#      lagged); keys of 1 hour keep their values and their write times (key_values.written_at)
#   b. a small buffer: expired and live keys evicted by other keys and loaded again
#   c. crash (stop 'immediate') after sc_rollup: the stored times survive; transactional keys
#      committed but not yet folded keep their commit times too
#   d. concurrent writers on 1,000 keys with a retention of 2 seconds: once they stop and the
#      retention passes, every key reads 0 (while keys of 1 hour written alongside are exact);
#      written once more by concurrent clients, each key holds exactly that write
#   e. pg_dump and pg_restore: written_at is data, expired keys stay expired in the copy

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('expiry', "slotted_counter.flush_interval = 0\nmax_connections = 30\n");
$node->safe_psql('postgres', 'CREATE EXTENSION slotted_counter');

# Writes keys 1..$n with value k into buffered and transactional counters; returns times that
# bracket the buffered statement (its start, a clock read after it) and the transactional commit
# (a clock read before the statement, one after).
sub write_keys
{
	my ($n, $buffered, $transactional) = @_;
	my $sum_b = join(' + ', map { "count(sc_incr('$_', k, k))" } @$buffered);
	my $sum_t = join(' + ', map { "count(sc_incr('$_', k, k))" } @$transactional);
	my $started_b;
	if (@$buffered)
	{
		$started_b = $node->safe_psql('postgres',
			"SELECT statement_timestamp(), $sum_b FROM generate_series(1, $n) k");
		$started_b = (split /\|/, $started_b)[0];
	}
	my $before = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	$node->safe_psql('postgres', "SELECT $sum_t FROM generate_series(1, $n) k");
	my $after = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
	return ($started_b, $before, $after);
}

# For a counter: how many keys of 1..$n do not read $expr (of k), their sum, how many keys sc_top
# lists (asked first, before the reads load any key into the buffer), and how many of them
# slotted_counter.lagged shows (only where that is known: an expired key is never shown, a live
# one only once stored).
sub key_check
{
	my ($db, $counter, $n, $expr, $with_lagged) = @_;
	my $top = $node->safe_psql($db, "SELECT count(*) FROM sc_top('$counter', $n + 10)");
	my $lagged = $with_lagged
	  ? ", (SELECT count(*) FROM slotted_counter.lagged WHERE counter = '$counter' AND key <= $n)"
	  : '';
	return $node->safe_psql($db, qq{
SELECT (SELECT count(*) FROM generate_series(1, $n) k WHERE sc_sum('$counter', k) <> $expr),
       sc_sum_keys('$counter', ARRAY(SELECT generate_series(1, $n)::bigint)), $top$lagged});
}

# The written_at (the last write's time) of keys 1..$n of a counter in slotted_counter.key_values: how
# many lie in [$from, $to], of how many.
sub stamps
{
	my ($db, $counter, $n, $from, $to) = @_;
	return $node->safe_psql($db, qq{
SELECT count(*) FILTER (WHERE written_at BETWEEN '$from' AND '$to'), count(*) FROM slotted_counter.key_values
 WHERE counter = '$counter'::slotted_counter::integer AND key <= $n});
}

my $sum100 = 100 * 101 / 2;

# a. A clean restart.
$node->safe_psql('postgres', q{
SELECT sc_create('restart_old_b', 'buffered', retain => '3 seconds'),
       sc_create('restart_old_t', 'transactional', retain => '3 seconds'),
       sc_create('restart_live_b', 'buffered', retain => '1 hour'),
       sc_create('restart_live_t', 'transactional', retain => '1 hour')});
my ($a_b, $a_from, $a_to) = write_keys(100, [qw(restart_old_b restart_live_b)],
	[qw(restart_old_t restart_live_t)]);
$node->safe_psql('postgres', 'SELECT pg_sleep(3.1)');
# written just before the restart
$node->safe_psql('postgres', q{
SELECT sc_incr('restart_live_b', k, k), sc_incr('restart_live_t', k, k) FROM generate_series(101, 110) k});
$node->restart;
for my $c (qw(restart_old_b restart_old_t))
{
	is(key_check('postgres', $c, 100, '0', 1), '0|0|0|0',
		"restart: $c, idle past its retention before the restart, reads 0 in every read");
}
for my $c (qw(restart_live_b restart_live_t))
{
	is(key_check('postgres', $c, 110, 'k'), "0|" . (110 * 111 / 2) . "|110",
		"restart: $c (1 hour) keeps every value, those written just before the restart too");
}
is($node->safe_psql('postgres', q{SELECT sc_incr('restart_old_b', 1, 5), sc_incr('restart_old_t', 1, 5)}),
	'5|5', 'restart: a write to an expired key counts from 0');
is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', 'restart: a rollup');
is(stamps('postgres', 'restart_live_b', 100, $a_b, $a_from), '100|100',
	'restart: written_at of a buffered key is its write, kept through the restart');
is(stamps('postgres', 'restart_live_t', 100, $a_from, $a_to), '100|100',
	'restart: written_at of a transactional key is its commit, kept through the restart');

# b. A buffer of 256 entries: keys flushed, idle past the retention, then evicted by 5,000 other
#    keys and loaded again by the reads.
my $small = preloaded_node('expiry_small',
	"slotted_counter.flush_interval = 0\nslotted_counter.max_entries = 256\n");
$small->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('evict_old_b', 'buffered', retain => '3 seconds'),
       sc_create('evict_old_t', 'transactional', retain => '3 seconds'),
       sc_create('evict_live_b', 'buffered', retain => '1 hour'),
       sc_create('evict_live_t', 'transactional', retain => '1 hour'),
       sc_create('filler', 'buffered');
SELECT count(sc_incr(c, k, k)) FROM generate_series(1, 40) k,
  (VALUES ('evict_old_b'), ('evict_old_t'), ('evict_live_b'), ('evict_live_t')) v(c);
SELECT sc_rollup();
SELECT pg_sleep(3.1);
});
my $evictions = q{SELECT evictions FROM slotted_counter.stats WHERE datname = current_database()};
my $evicted_before = $small->safe_psql('postgres', $evictions);
$small->safe_psql('postgres', q{SELECT count(sc_incr('filler', k, 1)) FROM generate_series(1, 5000) k});
is($small->safe_psql('postgres', "SELECT ($evictions) > $evicted_before"), 't',
	'small buffer: the other keys evicted entries');
my $small_check = sub {
	my ($c, $expr) = @_;
	my $top = $small->safe_psql('postgres', "SELECT count(*) FROM sc_top('$c', 50)");
	return $top . '|' . $small->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE sc_sum('$c', k) <> $expr),
       sc_sum_keys('$c', ARRAY(SELECT generate_series(1, 40)::bigint))
  FROM generate_series(1, 40) k});
};
for my $c (qw(evict_old_b evict_old_t))
{
	is($small_check->($c, '0'), '0|0|0', "small buffer: $c, expired, reads 0 when loaded again");
}
for my $c (qw(evict_live_b evict_live_t))
{
	is($small_check->($c, 'k'), '40|0|820', "small buffer: $c (1 hour) keeps every value when loaded again");
}
# Writes: the filler's entries made clean first (with no periodic flush a buffer full of dirty
# entries has no room for a transactional commit); this pass may delete the expired keys.
$small->safe_psql('postgres', 'SELECT sc_rollup()');
for my $c (qw(evict_old_b evict_old_t))
{
	is($small->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE sc_incr('$c', k, 1) <> 1) FROM generate_series(1, 40) k"),
		'0', "small buffer: every key of $c counts again from 0");
}
for my $c (qw(evict_live_b evict_live_t))
{
	is($small->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE sc_incr('$c', k, 1) <> k + 1) FROM generate_series(1, 40) k"),
		'0', "small buffer: every key of $c counts on from its value");
}
$small->stop;

# c. A crash after sc_rollup: the stored times are the writes' and survive it. Transactional keys
#    committed after the rollup (not folded) keep their commit times too.
$node->safe_psql('postgres', q{
SELECT sc_create('crash_old_b', 'buffered', retain => '3 seconds'),
       sc_create('crash_old_t', 'transactional', retain => '3 seconds'),
       sc_create('crash_live_b', 'buffered', retain => '1 hour'),
       sc_create('crash_live_t', 'transactional', retain => '1 hour'),
       sc_create('unfolded_old_t', 'transactional', retain => '3 seconds'),
       sc_create('unfolded_live_t', 'transactional', retain => '1 hour')});
my ($c_b, $c_from, $c_to) = write_keys(100, [qw(crash_old_b crash_live_b)],
	[qw(crash_old_t crash_live_t)]);
$node->safe_psql('postgres', 'SELECT sc_rollup()');
my ($u_from, $u_to);
(undef, $u_from, $u_to) = write_keys(100, [], [qw(unfolded_old_t unfolded_live_t)]);
$node->safe_psql('postgres', 'SELECT pg_sleep(3.1)');
$node->stop('immediate');
$node->start;
for my $c (qw(crash_old_b crash_old_t unfolded_old_t))
{
	is(key_check('postgres', $c, 100, '0', 1), '0|0|0|0',
		"crash: $c, idle past its retention before the crash, reads 0 in every read");
}
is(key_check('postgres', 'crash_live_b', 100, 'k', 1), "0|$sum100|100|100",
	'crash: crash_live_b (1 hour) keeps every flushed value');
is(key_check('postgres', 'crash_live_t', 100, 'k', 1), "0|$sum100|100|100",
	'crash: crash_live_t (1 hour) keeps every value');
is(key_check('postgres', 'unfolded_live_t', 100, 'k'), "0|$sum100|100",
	'crash: unfolded_live_t (1 hour) keeps every committed value');
is(stamps('postgres', 'crash_live_b', 100, $c_b, $c_from), '100|100',
	'crash: written_at of a flushed buffered key is its write');
is(stamps('postgres', 'crash_live_t', 100, $c_from, $c_to), '100|100',
	'crash: written_at of a folded transactional key is its commit');
is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', 'crash: a rollup folds the rest');
is(stamps('postgres', 'unfolded_live_t', 100, $u_from, $u_to), '100|100',
	'crash: written_at of a transactional key folded after the crash is its commit');
is($node->safe_psql('postgres', q{
SELECT sc_incr('crash_old_b', 1, 5), sc_incr('crash_old_t', 1, 5), sc_incr('unfolded_old_t', 1, 5)}),
	'5|5|5', 'crash: a write to an expired key counts from 0');

# d. Concurrent writers on 1,000 keys: counters of 2 seconds and of 1 hour written alike.
$node->safe_psql('postgres', q{
SELECT sc_create('load_old_b', 'buffered', retain => '2 seconds'),
       sc_create('load_old_t', 'transactional', retain => '2 seconds'),
       sc_create('load_live_b', 'buffered', retain => '1 hour'),
       sc_create('load_live_t', 'transactional', retain => '1 hour')});
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --transactions=10',
	0,
	[qr{actually processed: 40/40}],
	[qr{^$}],
	'load: 4 clients, 10 sweeps each over 1,000 keys of every counter',
	{
		'046_sweep' => q{
SELECT count(sc_incr('load_old_b', k, 1)) + count(sc_incr('load_live_b', k, 1)) FROM generate_series(1, 1000) k;
SELECT count(sc_incr('load_old_t', k, 1)) + count(sc_incr('load_live_t', k, 1)) FROM generate_series(1, 1000) k;
}
	});
$node->safe_psql('postgres', 'SELECT pg_sleep(2.1)');
for my $c (qw(load_old_b load_old_t))
{
	is(key_check('postgres', $c, 1000, '0', 1), '0|0|0|0',
		"load: every key of $c reads 0 once its writers stopped for its retention");
}
for my $c (qw(load_live_b load_live_t))
{
	is(key_check('postgres', $c, 1000, '40'), '0|40000|1000',
		"load: every key of $c (1 hour) holds the 40 increments");
}
# Each key written once more, by one of 4 concurrent clients, with delta k.
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --transactions=1',
	0,
	[qr{actually processed: 4/4}],
	[qr{^$}],
	'load: 4 clients write each key once more',
	{
		'046_once_more' => q{
SELECT count(sc_incr('load_old_b', k, k)) FROM generate_series(1, 1000) k WHERE k % 4 = :client_id;
SELECT count(sc_incr('load_old_t', k, k)) FROM generate_series(1, 1000) k WHERE k % 4 = :client_id;
}
	});
# Read under a retention of 1 hour, so that no slowness of the machine can expire them again.
$node->safe_psql('postgres', q{
SELECT sc_alter_retention('load_old_b', '1 hour'), sc_alter_retention('load_old_t', '1 hour')});
for my $c (qw(load_old_b load_old_t))
{
	is(key_check('postgres', $c, 1000, 'k'), '0|500500|1000',
		"load: every key of $c holds exactly its one write since the expiry");
}

# e. pg_dump and pg_restore, the dump taken after the retention passed.
$node->safe_psql('postgres', q{
SELECT sc_create('dump_old_b', 'buffered', retain => '3 seconds'),
       sc_create('dump_old_t', 'transactional', retain => '3 seconds'),
       sc_create('dump_live_b', 'buffered', retain => '1 hour'),
       sc_create('dump_live_t', 'transactional', retain => '1 hour')});
my ($e_b, $e_from, $e_to) = write_keys(100, [qw(dump_old_b dump_live_b)],
	[qw(dump_old_t dump_live_t)]);
$node->safe_psql('postgres', 'SELECT sc_rollup(); SELECT pg_sleep(3.1)');
my $dump = $node->basedir . '/expiry.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], 'dump: pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'dump: pg_restore');
for my $c (qw(dump_old_b dump_old_t))
{
	is(key_check('restored', $c, 100, '0', 1), '0|0|0|0', "dump: $c reads 0 in the restored copy");
}
for my $c (qw(dump_live_b dump_live_t))
{
	is(key_check('restored', $c, 100, 'k', 1), "0|$sum100|100|100",
		"dump: $c (1 hour) keeps every value in the restored copy");
}
is(stamps('restored', 'dump_live_b', 100, $e_b, $e_from), '100|100',
	'dump: written_at of a buffered key is still its write');
is(stamps('restored', 'dump_live_t', 100, $e_from, $e_to), '100|100',
	'dump: written_at of a transactional key is still its commit');
is($node->safe_psql('restored', q{SELECT sc_incr('dump_old_b', 1, 5), sc_incr('dump_old_t', 1, 5)}),
	'5|5', 'dump: a write to an expired key of the copy counts from 0');

$node->stop;
done_testing();
