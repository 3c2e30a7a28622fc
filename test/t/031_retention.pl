# Retention under the real clock crossing expiry, with storage measured, under loads sized by
# their calls; what is stored is judged against the times the server stamps, never against how
# long anything took.
#   1. Unbucketed counters (buffered, transactional) with retain '2 seconds' under a load that
#      writes a new key on every call (24,000 calls from 8 clients): after every pass, no row is
#      left of a key whose last write was retain before the pass before it, or earlier (so the
#      rows stored are at most the keys written since then), while a key written by every call
#      counts every call; once the load stops, everything expires.
#   2. A bucketed counter of '1 second' buckets with retain '2 seconds': after every pass no
#      bucket is left that ended retain before the pass before it, and reads never include a
#      bucket that ended more than 2 seconds ago.
#   3. 10,000 keys written at random (24,000 calls) while passes expire the idle ones (retain
#      '1 second'): the buffer and the table agree on every key afterwards (a row deleted under a
#      live entry, or an entry loaded while its row was being deleted, would not).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('retention',
	"slotted_counter.flush_interval = 200\nmax_connections = 40\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('new_b', 'buffered', retain => '2 seconds'),
       sc_create('new_t', 'transactional', retain => '2 seconds'),
       sc_create('hits_b', 'buffered', '1 second', '2 seconds');
CREATE SEQUENCE keys_b;
CREATE SEQUENCE keys_t;
});

# pgbench, `transactions` calls for each of 8 clients, with a script; returns the handle and its
# output.
sub start_load
{
	my ($name, $script_text, $transactions) = @_;
	my $script = $node->basedir . "/$name.sql";
	append_to_file($script, $script_text);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '--no-vacuum', '--client=8', '--jobs=2', "--transactions=$transactions",
			"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return { handle => $h, out => \$out, err => \$err, calls => 8 * $transactions };
}

sub finish_load
{
	my ($load, $what) = @_;
	$load->{handle}->finish;
	my $failed = () = ${ $load->{err} } =~ /ERROR/g;
	is($failed, 0, "$what: no call failed");
	diag(${ $load->{err} }) if $failed;
	my ($tx) = ${ $load->{out} } =~ /number of transactions actually processed: (\d+)/;
	is($tx, $load->{calls}, "$what: pgbench made its $load->{calls} calls");
	return $tx // 0;
}

# 1 and 2 together: new keys, and the hot bucketed key.
my $load1 = start_load('new_keys', q{
SELECT sc_incr('new_b', nextval('keys_b'), 1), sc_incr('new_b', 0, 1);
SELECT sc_incr('new_t', nextval('keys_t'), 1), sc_incr('new_t', 0, 1);
SELECT sc_incr('hits_b', 1, 1);
}, 3000);

# Rounds of a pass (sc_rollup) and a look at what is stored, in one session, while the load
# makes its first 16,000 calls. A pass that starts at P expires every key whose last write
# (written_at) is at or before P - retain, and every bucket that ended then; a write stamps the
# clock when it adds (a transactional one, its commit). The rows a round looks at are checked
# against the start of the pass before its own (the clock the server read before it): a write
# stamped before that has had a whole pass to be flushed or folded, then expired.
my $sampler = $node->background_psql('postgres');
$sampler->set_query_timer_restart();    # the hang guard is per query, not for the whole load
my $stored = q{SELECT count(*) FROM slotted_counter.key_values WHERE counter = '%s'::slotted_counter::integer};
my ($rounds, $checked, $stale, $series_stale) = (0, 0, 0, 0);
my ($max_b, $max_t, $max_buckets) = (0, 0, 0);
my $previous;
while (1)
{
	my $pass = $sampler->query_safe('SELECT clock_timestamp()');
	$sampler->query_safe('SELECT sc_rollup()');
	$rounds++;
	my $row = $sampler->query_safe(sprintf(q{
SELECT (SELECT last_value FROM keys_b), (%s), (%s), (%s),
       (SELECT count(*) FILTER (WHERE bucket + interval '1 second' <= statement_timestamp() - interval '2 seconds')
          FROM sc_series('hits_b', 1, NULL, NULL))},
		sprintf($stored, 'new_b'), sprintf($stored, 'new_t'), sprintf($stored, 'hits_b')));
	my ($keys, $rb, $rt, $rh, $series) = split /\|/, $row;
	$max_b = $rb if $rb > $max_b;
	$max_t = $rt if $rt > $max_t;
	$max_buckets = $rh if $rh > $max_buckets;
	$series_stale += $series;
	if (defined $previous)
	{
		$checked++;
		my $left = $sampler->query_safe(qq{
SELECT count(*), coalesce(string_agg(DISTINCT c.name, ', '), '') FROM slotted_counter.key_values t
JOIN slotted_counter.counters c ON c.id = t.counter
WHERE (c.name IN ('new_b', 'new_t') AND t.key <> 0
       AND t.written_at <= '$previous'::timestamptz - interval '2 seconds')
   OR (c.name = 'hits_b' AND t.bucket + interval '1 second' <= '$previous'::timestamptz - interval '2 seconds')});
		my ($count, $which) = split /\|/, $left;
		if ($count > 0)
		{
			$stale += $count;
			diag("after the pass at $pass: $count rows of $which expired before the pass at $previous");
		}
	}
	$previous = $pass;
	last if $keys >= 16000;
	$load1->{handle}->pump_nb if $load1->{handle}->pumpable;
	last unless $load1->{handle}->pumpable;    # (a load that failed, which is reported below)
	usleep(200_000);
}
# The key written by every call is read after the load: its retention is lifted while the load
# still runs (it has a third of its calls to make), so that it need not be read within 2 s of them.
$sampler->query_safe(q{SELECT sc_alter_retention('new_b', NULL), sc_alter_retention('new_t', NULL)});
my $calls = finish_load($load1, 'new keys and hot bucket');

my $keys_b = $node->safe_psql('postgres', 'SELECT last_value FROM keys_b');
is($stale, 0, "after each of $checked passes, no row was left of a key or a bucket that had "
	  . 'expired by the pass before it');
is($series_stale, 0, 'sc_series never included a bucket that ended more than 2 seconds before');
note("storage: at most $max_b (buffered) and $max_t (transactional) rows, and $max_buckets "
	  . "buckets, in $rounds rounds while $keys_b keys were written");
is($node->safe_psql('postgres', q{SELECT sc_sum('new_b', 0) = sc_sum('new_t', 0)}), 't',
	'the key written by every call counted every call, both durabilities');
is($node->safe_psql('postgres', qq{SELECT sc_sum('new_b', 0) >= $calls}), 't',
	'... and that is every call pgbench counted');

# After the load everything expires: the next passes delete every row.
$sampler->query_safe(q{
SELECT sc_alter_retention('new_b', '2 seconds'), sc_alter_retention('new_t', '2 seconds')});
$sampler->quit;
ok( $node->poll_query_until('postgres', q{
SELECT sc_rollup() >= 0 AND NOT EXISTS (SELECT FROM slotted_counter.key_values t
  WHERE t.counter IN ('new_b'::slotted_counter::integer, 'new_t'::slotted_counter::integer,
                      'hits_b'::slotted_counter::integer))}),
	'once nothing is written, every key and bucket expires');
is($node->safe_psql('postgres', q{SELECT sc_sum('new_b', 0), sc_sum('new_t', 0), sc_sum('hits_b', 1)}),
	'0|0|0', 'expired keys read 0');

# 3. Keys 1..10000 written at random, while passes expire those idle for their retention of
#    1 second (on a machine like ours, thousands at each pass) and writes keep arriving for them.
$node->safe_psql('postgres', q{
SELECT sc_create('race_b', 'buffered', retain => '1 second'),
       sc_create('race_t', 'transactional', retain => '1 second');
});
my $load3 = start_load('race', q{
\set k random(1, 10000)
SELECT sc_incr('race_b', :k, 1), sc_incr('race_t', :k, 1);
}, 3000);
my $passes = 0;
do
{
	$node->safe_psql('postgres', 'SELECT sc_rollup()');
	$passes++;
	$load3->{handle}->pump_nb if $load3->{handle}->pumpable;
} while ($load3->{handle}->pumpable);
finish_load($load3, 'racing writes');
# No more expiry from here on; every value read now must be what the table holds.
$node->safe_psql('postgres', q{
SELECT sc_alter_retention('race_b', NULL), sc_alter_retention('race_t', NULL)});
my $values = q{SELECT string_agg(k || ':' || sc_sum('race_b', k) || ':' || sc_sum('race_t', k), ',' ORDER BY k)
FROM generate_series(1, 10000) k};
my $before = $node->safe_psql('postgres', $values);
$node->restart;
my $after = $node->safe_psql('postgres', $values);
my %after = map { my ($k, $b, $t) = split /:/; ($k => "$b:$t") } split /,/, $after;
my $differ = grep { my ($k, $b, $t) = split /:/; $after{$k} ne "$b:$t" } split /,/, $before;
is($differ, 0, 'after a restart every key reads what it read before: buffer and table agreed');
my $restarted = $node->safe_psql('postgres',
	q{SELECT count(*) FILTER (WHERE sc_sum('race_b', k) < 3) FROM generate_series(1, 10000) k});
note("$passes passes; $restarted of 10000 keys read less than 3 at the end");

done_testing();
