# Two-phase commit and transactional counters.
#
# A transaction with pending transactional increments cannot be prepared: PREPARE TRANSACTION
# fails with 0A000, nothing is left prepared, and the whole transaction is gone (its increments
# and its other writes), in that session and for everybody else, also after a restart. A
# transaction that only touched a buffered counter, or only read a transactional one, prepares
# and commits (or rolls back) as usual.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('txn_prepare', qq{
max_prepared_transactions = 10
slotted_counter.flush_interval = 100
});
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('t');
SELECT sc_create('b', 'buffered');
CREATE TABLE log (note text);
SELECT sc_incr('t', 1, 5);
});

my $prepared_query = 'SELECT count(*) FROM pg_prepared_xacts';

# A transactional increment, then PREPARE, all in one session that goes on afterwards.
my ($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{\set VERBOSITY verbose
BEGIN;
SELECT sc_incr('t', 1, 3);
INSERT INTO log VALUES ('t');
PREPARE TRANSACTION 'x';
SELECT 'after', sc_sum('t', 1), (SELECT count(*) FROM pg_prepared_xacts), (SELECT count(*) FROM log);
BEGIN;
SELECT 'next', sc_incr('t', 1, 1);
COMMIT;
},
	on_error_stop => 0);
note "stdout:\n$stdout\nstderr:\n$stderr";
like($stderr, qr/ERROR:  0A000/, 'PREPARE TRANSACTION with a transactional increment fails with 0A000');
is( scalar(grep { /ERROR:/ } split /\n/, $stderr),
	1, 'that is the only error');
like($stdout, qr/^after\|5\|0\|0$/m,
	'in the same session afterwards: the increment is gone, nothing is prepared, the insert is gone');
like($stdout, qr/^next\|6$/m,
	'the session counts on from the committed value in its next transaction');
is($node->safe_psql('postgres', "$prepared_query; SELECT sc_sum('t', 1); SELECT count(*) FROM log"),
	"0\n6\n0", 'other sessions see no prepared transaction and the committed value');

# A transactional increment next to a buffered one: the buffered one stays, like after a
# rollback; the transactional one is gone.
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{\set VERBOSITY verbose
BEGIN;
SELECT sc_incr('b', 1, 4);
SELECT sc_incr('t', 1, 100);
SELECT sc_incr('t', 2, 100);
PREPARE TRANSACTION 'y';
},
	on_error_stop => 0);
like($stderr, qr/ERROR:  0A000/, 'PREPARE with transactional and buffered increments fails with 0A000');
is( $node->safe_psql(
		'postgres', "$prepared_query; SELECT sc_sum('t', 1), sc_sum('t', 2), sc_sum('b', 1)"),
	"0\n6|0|4", 'the transactional increments are gone, the buffered one stays');

# Increments undone by a savepoint rollback before the PREPARE, then a PREPARE that fails: still
# nothing counted. The same session then prepares a transaction that only reads.
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{\set VERBOSITY verbose
BEGIN;
SELECT sc_incr('t', 1, 1000);
SAVEPOINT s;
SELECT sc_incr('t', 1, 1000);
ROLLBACK TO SAVEPOINT s;
PREPARE TRANSACTION 'z';
SELECT 'after', sc_sum('t', 1);
},
	on_error_stop => 0);
like($stderr, qr/ERROR:  0A000/, 'PREPARE with a pending increment before a savepoint fails with 0A000');
like($stdout, qr/^after\|6$/m, 'none of its increments counted');

# Only a buffered counter: the transaction prepares; the increment took effect at once.
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT sc_incr('b', 1, 10);
INSERT INTO log VALUES ('b');
PREPARE TRANSACTION 'buffered_only';
});
is($node->safe_psql('postgres', "SELECT gid FROM pg_prepared_xacts"),
	'buffered_only', 'a transaction that only touched a buffered counter is prepared');
is($node->safe_psql('postgres', q{SELECT sc_sum('b', 1), (SELECT count(*) FROM log)}),
	'14|0', 'its buffered increment counts at once; its insert waits for COMMIT PREPARED');
$node->safe_psql('postgres', q{COMMIT PREPARED 'buffered_only'});
is( $node->safe_psql(
		'postgres', "$prepared_query; SELECT sc_sum('b', 1), (SELECT count(*) FROM log)"),
	"0\n14|1", 'COMMIT PREPARED commits it');

# A buffered increment in a transaction that is prepared and then rolled back stays.
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT sc_incr('b', 2, 7);
PREPARE TRANSACTION 'rolled_back';
});
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'rolled_back'});
is($node->safe_psql('postgres', "$prepared_query; SELECT sc_sum('b', 2)"),
	"0\n7", 'ROLLBACK PREPARED keeps a buffered increment, like ROLLBACK');

# Reading a transactional counter is no obstacle to PREPARE.
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT sc_sum('t', 1);
INSERT INTO log VALUES ('read');
PREPARE TRANSACTION 'reader';
});
is($node->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts'),
	'reader', 'a transaction that only read a transactional counter is prepared');
$node->safe_psql('postgres', q{COMMIT PREPARED 'reader'});
is($node->safe_psql('postgres', "SELECT count(*) FROM log WHERE note = 'read'"),
	'1', 'and commits');

# One session: a committed transactional increment, then a refused PREPARE, then a transaction
# with a buffered increment only. Nothing pending is left over from the earlier transactions, so
# the last one prepares.
($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{\set VERBOSITY verbose
BEGIN;
SELECT 'first', sc_incr('t', 3, 1);
COMMIT;
BEGIN;
SELECT 'second', sc_incr('t', 3, 1);
PREPARE TRANSACTION 'refused';
BEGIN;
SELECT 'third', sc_incr('b', 3, 1);
PREPARE TRANSACTION 'accepted';
SELECT 'prepared', string_agg(gid, ',') FROM pg_prepared_xacts;
COMMIT PREPARED 'accepted';
SELECT 'values', sc_sum('t', 3), sc_sum('b', 3), (SELECT count(*) FROM pg_prepared_xacts);
},
	on_error_stop => 0);
note "stdout:\n$stdout\nstderr:\n$stderr";
is( scalar(grep { /ERROR:/ } split /\n/, $stderr),
	1, 'one session, three transactions: one error');
like($stderr, qr/ERROR:  0A000/, 'the PREPARE with a transactional increment is refused');
like($stdout, qr/^prepared\|accepted$/m,
	'the later buffered-only transaction of the same session is prepared');
like($stdout, qr/^values\|1\|1\|0$/m,
	'after COMMIT PREPARED: the committed transactional increment and the buffered one count');

# Nothing of the failed PREPAREs comes back after a restart (nor after replaying the WAL of an
# immediate stop); transactional counting goes on.
$node->restart;
is( $node->safe_psql(
		'postgres', "$prepared_query; SELECT sc_sum('t', 1), sc_sum('t', 2), sc_sum('b', 1), sc_sum('b', 2)"),
	"0\n6|0|14|7", 'after a restart: the same values, nothing prepared');
$node->stop('immediate');
$node->start;
is( $node->safe_psql(
		'postgres', "$prepared_query; SELECT sc_sum('t', 1), sc_sum('t', 2)"),
	"0\n6|0", 'after an immediate stop: the same transactional values, nothing prepared');
is($node->safe_psql('postgres', q{BEGIN; SELECT sc_incr('t', 1, 1); COMMIT;}),
	'7', 'transactional increments work as before');

$node->stop;
done_testing();
