# An attachment whose row an open transaction holds (an sc_detach not committed) is skipped, and
# does not decide which table owner's attachments the attacher runs: another owner's attachment,
# due behind it, runs in the same round, instead of waiting (with attachers handing over to each
# other without end) until the transaction ends.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# Flushes, and so attachers, only on sc_rollup(): nothing runs before the row is held.
my $node = preloaded_node('attach_locked_row', "slotted_counter.flush_interval = 0\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE TABLE ta (id bigint PRIMARY KEY, v bigint NOT NULL DEFAULT 0);
CREATE TABLE tb (id bigint PRIMARY KEY, v bigint NOT NULL DEFAULT 0);
INSERT INTO ta (id) VALUES (1);
INSERT INTO tb (id) VALUES (1);
ALTER TABLE ta OWNER TO alice;
ALTER TABLE tb OWNER TO bob;
SELECT sc_create('ca', 'buffered');
SELECT sc_create('cb', 'buffered');
SELECT sc_alter_owner('ca', 'alice'), sc_alter_owner('cb', 'bob');
});
# alice's attachment first (its counter's id is lower, neither has run): it is due first.
$node->safe_psql('postgres', q{SELECT sc_attach('ca', 'ta', 'id', 'v', '0')},
	extra_params => [ '-U', 'alice' ]);
$node->safe_psql('postgres', q{SELECT sc_attach('cb', 'tb', 'id', 'v', '0')},
	extra_params => [ '-U', 'bob' ]);

my $holder = $node->background_psql('postgres', extra_params => [ '-U', 'alice' ]);
$holder->query_safe(q{BEGIN; SELECT sc_detach('ca', 'ta')});
$node->safe_psql('postgres', q{SELECT sc_incr('ca', 1, 3), sc_incr('cb', 1, 7)});
$node->safe_psql('postgres', q{SELECT sc_rollup()});
ok($node->poll_query_until('postgres', q{SELECT v = 7 FROM tb}),
	'bob\'s attachment ran although alice\'s, due first, was held');
is($node->safe_psql('postgres', q{SELECT v FROM ta}), '0', 'alice\'s held attachment did not run');
is( $node->safe_psql(
		'postgres', q{SELECT failures FROM slotted_counter.attachments WHERE target = 'ta'::regclass}),
	'0', 'and it was skipped, not failed');
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		              WHERE backend_type = 'slotted_counter attacher'}),
	'and the attachers ended while the row stayed held');

$holder->query_safe('ROLLBACK');
$holder->quit;
ok(wait_attached($node, 'postgres'), 'once released, the attachment runs');
is($node->safe_psql('postgres', q{SELECT v FROM ta}), '3', 'and writes what changed meanwhile');

# The same with the table held instead of the row (a transaction that goes on to drop it): the
# run is skipped rather than wait for the table while it holds the attachment's row, which the
# DROP TABLE deletes (a deadlock).
$holder = $node->background_psql('postgres', extra_params => [ '-U', 'alice' ]);
$holder->query_safe(q{BEGIN; LOCK TABLE ta IN ACCESS EXCLUSIVE MODE});
$node->safe_psql('postgres', q{SELECT sc_incr('ca', 1, 4), sc_incr('cb', 1, 1)});
$node->safe_psql('postgres', q{SELECT sc_rollup()});
ok($node->poll_query_until('postgres', q{SELECT v = 8 FROM tb}),
	'table held: bob\'s attachment ran although alice\'s table was held');
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		              WHERE backend_type = 'slotted_counter attacher'}),
	'table held: the attachers ended while the table stayed held');
is( $node->safe_psql(
		'postgres', q{SELECT failures FROM slotted_counter.attachments WHERE target = 'ta'::regclass}),
	'0', 'table held: alice\'s attachment was skipped, not failed');
my ($dropped, $drop_failed) = $holder->query(q{DROP TABLE ta; COMMIT});
is($drop_failed ? $holder->{stderr} : 'dropped', 'dropped',
	'table held: the transaction that held it drops it and commits');
$holder->quit;
is($node->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter.attachments}),
	'1', 'table held: the dropped table\'s attachment went with it');

$node->stop;
done_testing();
