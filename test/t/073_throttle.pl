# Rate limiters (sc_throttle) under concurrency, the real clock, crashes, PREPARE, expiry and a
# dump and restore.
#   a. 8 clients × 500 calls of cost 1 on one key with a burst of 1,000 (1,000 a year: nothing
#      comes back while the test runs), buffered and transactional: exactly 1,000 calls are
#      admitted, and the key is empty afterwards.
#   b. 10 a second with a burst of 10: the burst is admitted at once; half a second later (on the
#      server's clock) as many more as the time passed allows, about 5: never fewer than the time
#      since the burst brought back, never more than the time since its start. The same inside one
#      transaction, whose calls see the clock move.
#   c. Transactional: a call's cost is taken at the call, seen at once by another session and
#      refused to it, and given back by ROLLBACK; a committed call survives a crash. Buffered: what
#      sc_rollup() flushed survives a clean restart, and a crash forgets at most what was not
#      flushed (the key admits more after it, never less).
#   d. PREPARE TRANSACTION of a transaction that throttled on a transactional limiter fails with
#      0A000 and gives the cost back.
#   e. A key full again costs no storage: its row goes by the retention pass, not before the key
#      is full again, and the key then reads full.
#   f. After pg_dump and pg_restore into another database, a limiter is still one, with its limit
#      and its keys' state, and sc_throttle works there.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('throttle', qq{
slotted_counter.flush_interval = 100
max_prepared_transactions = 2
restart_after_crash = on
synchronous_commit = on
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE UNLOGGED TABLE admitted (counter text NOT NULL, allowed boolean NOT NULL);
-- The burst of a fresh key (10 calls), then, once the server's clock is 0.5 s past the end of the
-- burst, 20 calls more; with the clock read around each part. Returns the burst admitted, what
-- its last call left, and the calls admitted after the wait; with, in whole units of 0.1 s, the
-- time the burst took (as much may have come back during it), the time from the end of the burst
-- to the second part's start (at least that much came back) and from the burst's start to the
-- second part's end (at most that much can have).
CREATE FUNCTION burst_then_wait(c slotted_counter, OUT burst bigint, OUT left_after bigint,
                                OUT admitted bigint, OUT burst_units bigint,
                                OUT least_units bigint, OUT most_units bigint)
LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz;
  t1 timestamptz;
  t2 timestamptz;
  t3 timestamptz;
  r record;
BEGIN
  burst := 0;
  admitted := 0;
  t0 := clock_timestamp();
  FOR i IN 1..10 LOOP
    SELECT * INTO r FROM sc_throttle(c, 1);
    burst := burst + r.allowed::int;
  END LOOP;
  left_after := r.remaining;
  t1 := clock_timestamp();
  WHILE clock_timestamp() < t1 + interval '0.5 seconds' LOOP
    PERFORM pg_sleep(0.01);
  END LOOP;
  t2 := clock_timestamp();
  FOR i IN 1..20 LOOP
    SELECT * INTO r FROM sc_throttle(c, 1);
    admitted := admitted + r.allowed::int;
  END LOOP;
  t3 := clock_timestamp();
  burst_units := floor(extract(epoch FROM t1 - t0) * 10);
  least_units := floor(extract(epoch FROM t2 - t1) * 10);
  most_units := floor(extract(epoch FROM t3 - t0) * 10);
END $$;
});

# a. Concurrent callers of one key admit exactly the burst.
$node->safe_psql('postgres', q{
SELECT sc_create('lim_b', 'buffered', rate => 1000, per => '365 days', burst => 1000),
       sc_create('lim_t', 'transactional', rate => 1000, per => '365 days', burst => 1000);
});
for my $c (qw(lim_b lim_t))
{
	$node->pgbench(
		'--no-vacuum --client=8 --jobs=4 --transactions=500',
		0,
		[qr{actually processed: 4000/4000}],
		[qr{^$}],
		"$c: 8 clients make 500 calls each, without an error",
		{ "073_$c" => "INSERT INTO admitted SELECT '$c', allowed FROM sc_throttle('$c', 1);\n" });
	is( $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE allowed), count(*) FROM admitted WHERE counter = '$c'}),
		'1000|4000', "$c: of 4000 concurrent calls, exactly the burst of 1000 was admitted");
	is($node->safe_psql('postgres', qq{SELECT allowed, remaining FROM sc_throttle('$c', 1)}),
		'f|0', "$c: the key is empty afterwards: the next call is refused");
}

# b. The real clock: the burst at once, then what the time passed brings back.
$node->safe_psql('postgres', q{
SELECT sc_create('fast_b', 'buffered', rate => 10, per => '1 second', burst => 10),
       sc_create('fast_t', 'transactional', rate => 10, per => '1 second', burst => 10);
});
for my $c (qw(fast_b fast_t))
{
	my ($burst, $left, $admitted, $burst_units, $least, $most) =
	  split /\|/, $node->safe_psql('postgres', "SELECT * FROM burst_then_wait('$c')");
	note("$c: burst $burst in $burst_units tenths, $left left; after $least to $most tenths, "
		  . "$admitted more");
	is($burst, 10, "$c: a fresh key admits its burst of 10 at once");
	cmp_ok($left, '<=', $burst_units,
		"$c: the burst leaves 0, or no more than came back while it ran");
	cmp_ok($admitted, '>=', $least,
		"$c: half a second after the burst, at least one call per 0.1 s since it is admitted "
		  . "($least, so 5 or more)");
	cmp_ok($admitted, '<=', $most,
		"$c: and at most one per 0.1 s since the burst began: the rate holds");
}

# c. Transactional: taken at the call, seen by others, given back by ROLLBACK, kept by COMMIT
#    through a crash. A long per: nothing comes back while the test runs.
$node->safe_psql('postgres', q{
SELECT sc_create('slow_t', rate => 10, per => '1000 days'),
       sc_create('slow_b', 'buffered', rate => 10, per => '1000 days');
});
is( $node->safe_psql('postgres', q{
BEGIN;
SELECT remaining FROM sc_throttle('slow_t', 1, 3);
ROLLBACK;
SELECT remaining FROM sc_throttle('slow_t', 1, 0);}),
	"7\n10", 'a rolled-back transactional call takes nothing');

my $session = $node->background_psql('postgres');
$session->query_safe('BEGIN');
is($session->query_safe(q{SELECT allowed, remaining FROM sc_throttle('slow_t', 1, 8)}),
	't|2', 'a transaction takes 8 of 10');
is( $node->safe_psql('postgres', q{
SELECT allowed, remaining FROM sc_throttle('slow_t', 1, 0);
SELECT allowed, remaining FROM sc_throttle('slow_t', 1, 5);}),
	"t|2\nf|2",
	'another session sees the cost taken before COMMIT, and is refused what no longer fits');
$session->query_safe('ROLLBACK');
is($node->safe_psql('postgres', q{SELECT allowed, remaining FROM sc_throttle('slow_t', 1, 5)}),
	't|5', 'after ROLLBACK the other session is admitted what was given back');
$session->query_safe('BEGIN');
$session->query_safe(q{SELECT sc_throttle('slow_t', 1, 1)});
$session->query_safe('SAVEPOINT s');
$session->query_safe(q{SELECT sc_throttle('slow_t', 1, 3)});
$session->query_safe('ROLLBACK TO SAVEPOINT s');
$session->query_safe('COMMIT');
$session->quit;
is($node->safe_psql('postgres', q{SELECT remaining FROM sc_throttle('slow_t', 1, 0)}),
	'4', 'ROLLBACK TO SAVEPOINT gave back the calls after the savepoint; COMMIT kept the rest');

is($node->safe_psql('postgres', q{SELECT allowed, remaining FROM sc_throttle('slow_t', 2, 4)}),
	't|6', 'a committed transactional call takes 4');
$node->stop('immediate');
$node->start;
is( $node->safe_psql('postgres', q{
SELECT remaining FROM sc_throttle('slow_t', 2, 0);
SELECT remaining FROM sc_throttle('slow_t', 1, 0);}),
	"6\n4", 'after a crash, the committed calls are still taken');

# Buffered: flushed, then a clean restart; then unflushed, then a crash.
is( $node->safe_psql('postgres', q{
SELECT remaining FROM sc_throttle('slow_b', 1, 4);
SELECT sc_rollup() >= 0;}),
	"6\nt", 'a buffered call takes 4, and is flushed');
$node->restart;
is($node->safe_psql('postgres', q{SELECT remaining FROM sc_throttle('slow_b', 1, 0)}),
	'6', 'after a clean restart, the flushed buffered call is still taken');
is($node->safe_psql('postgres', q{SELECT remaining FROM sc_throttle('slow_b', 1, 2)}),
	'4', 'another buffered call takes 2');
$node->stop('immediate');
$node->start;
my $after_crash =
  $node->safe_psql('postgres', q{SELECT remaining FROM sc_throttle('slow_b', 1, 0)});
ok($after_crash == 4 || $after_crash == 6,
	'after a crash, a buffered key has at most the unflushed call back: it admits more, never '
	  . "less (remaining $after_crash: 4 or 6)");

# d. PREPARE TRANSACTION of a transaction that throttled.
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{\set VERBOSITY verbose
BEGIN;
SELECT allowed, remaining FROM sc_throttle('slow_t', 3, 3);
PREPARE TRANSACTION 'throttled';
SELECT 'after', remaining FROM sc_throttle('slow_t', 3, 0);
}, on_error_stop => 0);
like($stderr, qr/ERROR:  0A000/, 'PREPARE TRANSACTION after sc_throttle fails with 0A000');
is(scalar(grep { /ERROR:/ } split /\n/, $stderr), 1, 'that is the only error');
like($stdout, qr/^after\|10$/m, 'in the same session afterwards, the cost is given back');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM pg_prepared_xacts;
SELECT remaining FROM sc_throttle('slow_t', 3, 0);}),
	"0\n10", 'nothing is prepared, and other sessions see the key full');

# e. A key full again expires: its row goes, not before the key is full again. A tolerance of
#    5 s (50 units at 10 a second), so that the rows are still there when the test looks.
$node->safe_psql('postgres', q{
SELECT sc_create('exp_b', 'buffered', rate => 10, per => '1 second', burst => 50),
       sc_create('exp_t', 'transactional', rate => 10, per => '1 second', burst => 50);
});
is( $node->safe_psql('postgres', q{
SELECT string_agg(name || ':' || retain, ',' ORDER BY name) FROM slotted_counter.counters
 WHERE name IN ('exp_b', 'exp_t')}),
	'exp_b:00:00:05,exp_t:00:00:05', 'a limiter keeps its keys for its tolerance, 5 s');
my $stored = q{SELECT count(*) FROM slotted_counter.key_values kv
JOIN slotted_counter.counters c ON c.id = kv.counter WHERE c.name = '%s'};
for my $c (qw(exp_b exp_t))
{
	# The time the key is full again, at the latest: the call's reset_after from before the call.
	my $full_at = $node->safe_psql('postgres', qq{
SELECT now() + reset_after FROM sc_throttle('$c', 1, 50)});
	is( $node->safe_psql('postgres', sprintf(q{
SELECT sc_rollup() >= 0;
SELECT (%s) = 1 OR clock_timestamp() >= '%s'::timestamptz}, sprintf($stored, $c), $full_at)),
		"t\nt", "$c: a key that took something has its row");
	ok( $node->poll_query_until('postgres',
			sprintf(q{SELECT sc_rollup() >= 0 AND (%s) = 0}, sprintf($stored, $c))),
		"$c: once the key is full again, its row goes");
	is( $node->safe_psql('postgres', qq{
SELECT clock_timestamp() >= '$full_at'::timestamptz}),
		't', "$c: not before the key was full again");
	is( $node->safe_psql('postgres', qq{
SELECT allowed, remaining, reset_after = '0' FROM sc_throttle('$c', 1, 0);
SELECT allowed, remaining FROM sc_throttle('$c', 1, 50);}),
		"t|50|t\nt|0", "$c: the key reads full, and admits its whole burst again");
}

# f. pg_dump and pg_restore into another database.
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('app_b', 'buffered', rate => 10, per => '1000 days', burst => 20),
       sc_create('app_t', rate => 10, per => '1000 days', burst => 20, key_type => 'text');
SELECT allowed FROM sc_throttle('app_b', 1, 3);
SELECT allowed FROM sc_throttle('app_t', 'alice', 3);
SELECT sc_rollup();
});
my $limits = q{SELECT name, durability, bucket, retain, key_type, rate, per, burst
FROM slotted_counter.counters ORDER BY id};
my $before = $node->safe_psql('app', $limits);
is( $before,
	"app_b|buffered||2000 days|bigint|10|1000 days|20\n"
	  . "app_t|transactional||2000 days|text|10|1000 days|20",
	'before the dump: the limiters and their limits');
my $dump = $node->basedir . '/app.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('app') ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore --exit-on-error restores it without an error');
is($node->safe_psql('restored', $limits), $before, 'after the restore: the same limiters');
is( $node->safe_psql('restored', q{
SELECT allowed, remaining FROM sc_throttle('app_b', 1, 0);
SELECT allowed, remaining FROM sc_throttle('app_t', 'alice', 0);
SELECT allowed, remaining FROM sc_throttle('app_b', 2, 0);}),
	"t|17\nt|17\nt|20", 'with what their keys had taken');
is( $node->safe_psql('restored', q{
SELECT allowed, remaining FROM sc_throttle('app_b', 1, 17);
SELECT allowed, remaining FROM sc_throttle('app_b', 1, 1);
SELECT allowed, remaining FROM sc_throttle('app_t', 'alice', 18);
SELECT allowed, remaining FROM sc_throttle('app_t', 'bob', 20);}),
	"t|0\nf|0\nf|17\nt|0", 'sc_throttle goes on from there');
($ret, $stdout, $stderr) = $node->psql('restored', q{SELECT sc_incr('app_b', 1)});
like($stderr, qr/counter "app_b" is a rate limiter/, 'and sc_incr still refuses a limiter');

$node->stop;
done_testing();
