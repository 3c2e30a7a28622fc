# A clean stop never loses an acknowledged increment, even when the last flush cannot write:
#  - a user's session holds slotted_counter.key_values locked during a fast stop: its session ends,
#    the last flush writes everything;
#  - a prepared transaction holds the lock across the restart: the values the last flush could
#    not write are saved to a file, restored by the next start (exact while the lock stays), and
#    written once the lock goes;
#  - the file cannot be written, or the stop is immediate: the log says how much of which counter
#    is lost, and the next start has exactly the values the tables hold, nothing counted twice;
#  - the next start is in recovery (standby.signal): the file is not applied, the log says so.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('clean_stop',
	"slotted_counter.flush_interval = 100\nmax_prepared_transactions = 4\nwal_level = replica\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered'), sc_create('h', 'buffered', interval '1 hour');
SELECT sc_incr('b', 1, 100);
SELECT sc_rollup();
});
# Each value, then each counter's total (sc_total: the sums of the rows and the buffer's sum
# entries, made again for restored values).
my $values = q{SELECT sc_sum('b', 1) || ',' || sc_sum('b', 2) || ',' || sc_sum('h', 3)
                      || ',' || sc_total('b') || ',' || sc_total('h')};
my $stored = q{SELECT string_agg(counter || ':' || key || '=' || value, ' ' ORDER BY counter, key)
  FROM slotted_counter.key_values};
my $lock = q{BEGIN; LOCK TABLE slotted_counter.key_values IN EXCLUSIVE MODE;};

sub log_since
{
	my ($offset) = @_;
	return substr(slurp_file($node->logfile), $offset);
}

# A user's session holds the lock while the server stops (fast).
my $locker = $node->background_psql('postgres', on_error_stop => 0);
$locker->query_safe($lock);
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 1), sc_incr('b', 2, 2), sc_incr('h', 3, 3)});
my $offset = -s $node->logfile;
$node->restart;
$locker->quit;
is($node->safe_psql('postgres', $stored), '1:1=101 1:2=2 2:3=3',
	'a lock of a session: the stop ended it, and the last flush wrote every value');
unlike(log_since($offset), qr/slotted_counter: saved/, 'no file was needed');

# A prepared transaction keeps the lock across the restart.
$node->safe_psql('postgres', $lock . q{PREPARE TRANSACTION 'lock';});
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 10), sc_incr('b', 2, 20), sc_incr('h', 3, 30)});
# The increments started the flusher; its last flush is what says so (on a loaded machine the
# stop could otherwise come before the worker does).
is( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
  WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'}),
	1,
	'the flusher runs');
$offset = -s $node->logfile;
$node->restart;
my $log = log_since($offset);
like($log, qr/the flusher of database "postgres" exits with values it could not flush/,
	'the last flush could not write, and the flusher said so');
like($log, qr/slotted_counter: saved 3 values that could not be flushed/,
	'the postmaster saved the three values to a file');
like($log, qr/slotted_counter: restored 3 values that the last shutdown could not flush/,
	'the next start restored them');
ok(!-e $node->data_dir . '/pg_stat/slotted_counter.unflushed', 'and removed the file');
is($node->safe_psql('postgres', $values), '111,22,33,133,33',
	'every acknowledged increment is there, while the lock still stops flushes');
is($node->safe_psql('postgres', $stored), '1:1=101 1:2=2 2:3=3', 'the tables are as they were');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'lock'});
ok($node->poll_query_until('postgres', $stored, '1:1=111 1:2=22 2:3=33'),
	'once the lock is gone, the restarted flusher writes them, each once');
is($node->safe_psql('postgres', $values), '111,22,33,133,33', 'and the values are unchanged');

# Twice in a row: saved, restored, still locked, saved again, restored again.
$node->safe_psql('postgres', $lock . q{PREPARE TRANSACTION 'lock';});
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 1)});
$node->restart;
$node->safe_psql('postgres', q{SELECT sc_incr('b', 2, 1)});
$node->restart;
is($node->safe_psql('postgres', $values), '112,23,33,135,33', 'two restarts under the lock: exact');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'lock'});
ok($node->poll_query_until('postgres', $stored, '1:1=112 1:2=23 2:3=33'),
	'and then written once each');

# The file cannot be written: the log says what is lost, counter by counter.
my $counter_b = $node->safe_psql('postgres', q{SELECT id FROM slotted_counter.counters WHERE name = 'b'});
my $db = $node->safe_psql('postgres', q{SELECT oid FROM pg_database WHERE datname = 'postgres'});
$node->safe_psql('postgres', $lock . q{PREPARE TRANSACTION 'lock';});
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 4), sc_incr('b', 2, 5)});
my $pg_stat = $node->data_dir . '/pg_stat';
chmod(0500, $pg_stat) or die "chmod: $!";
$offset = -s $node->logfile;
$node->stop;
chmod(0700, $pg_stat) or die "chmod: $!";
$log = log_since($offset);
like($log, qr/slotted_counter: 2 unflushed values \(a net change of 9\) are lost: could not write file/,
	'an unwritable file: the log says how many values and increments are lost');
like($log, qr/lost in database $db, counter id $counter_b: a net change of 9 over 2 keys/,
	'and of which counter');
$node->start;
is($node->safe_psql('postgres', $values), '112,23,33,135,33',
	'the next start has the values of the tables: nothing counted twice');

# An immediate stop writes no shutdown checkpoint: nothing is saved, the log says what is lost.
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 6)});
$offset = -s $node->logfile;
$node->stop('immediate');
like(log_since($offset), qr/lost in database $db, counter id $counter_b: a net change of 6 over 1 keys.*/,
	'an immediate stop: the log says what is lost');
$node->start;
is($node->safe_psql('postgres', $values), '112,23,33,135,33', 'and nothing of it is applied');

# A start in recovery does not apply the file.
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 7)});
$node->stop;
ok(-e $node->data_dir . '/pg_stat/slotted_counter.unflushed', 'a file was saved');
$node->set_standby_mode;
$offset = -s $node->logfile;
$node->start;
like(log_since($offset), qr/lost: the server starts in recovery/,
	'a start in recovery (standby.signal) does not apply it, and says so');
ok(!-e $node->data_dir . '/pg_stat/slotted_counter.unflushed', 'the file is gone');
$node->promote;
$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'lock'});
is($node->safe_psql('postgres', $values), '112,23,33,135,33', 'after the promotion: the values of the tables');

# sc_incr_once: the request ids of increments the last flush could not write are saved with
# them; the same ids sent again after the restart count nothing more, before and after the
# restored values are written.
$node->safe_psql('postgres', q{SELECT sc_create('once', 'buffered')});
my $once = q{SELECT count(sc_incr_once('once', 5, 1, 'req-' || i)) FROM generate_series(1, 200) i};
$node->safe_psql('postgres', $lock . q{PREPARE TRANSACTION 'lock';});
$node->safe_psql('postgres', $once);
$offset = -s $node->logfile;
$node->restart;
like(log_since($offset), qr/saved 1 values that could not be flushed, 200 request ids/,
	'sc_incr_once: the 200 request ids were saved beside their increments');
$node->safe_psql('postgres', $once);
is($node->safe_psql('postgres', q{SELECT sc_sum('once', 5)}), '200',
	'the same 200 ids sent again after the restart count nothing more');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'lock'});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) FROM slotted_counter.requests WHERE request_id LIKE 'req-%'}, '200'),
	'once the lock is gone, the flush writes the ids with their increments');
$node->restart;
$node->safe_psql('postgres', $once);
is($node->safe_psql('postgres', q{SELECT sc_sum('once', 5)}), '200',
	'and after another restart the ids still count once');

$node->stop;
done_testing();
