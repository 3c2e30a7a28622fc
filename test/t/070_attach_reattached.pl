# An attachment attached again (sc_attach with another interval) while a round that read it is
# under way keeps what sc_attach set: the round's run of the old one is skipped, not run with the
# old row's data and then recorded over the new row (which would put its first run, meant to
# write everything flushed, an interval late). The round is held inside an earlier attachment's
# run by a user's lock on a row of its table.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# Attachers only after sc_rollup(): nothing runs but the round below.
my $node = preloaded_node('attach_reattached', "slotted_counter.flush_interval = 0\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE TABLE t1 (id bigint PRIMARY KEY, v bigint NOT NULL DEFAULT 0);
CREATE TABLE t2 (id bigint PRIMARY KEY, v bigint NOT NULL DEFAULT 0);
INSERT INTO t1 (id) VALUES (1);
INSERT INTO t2 (id) VALUES (1);
SELECT sc_create('c1', 'buffered'), sc_create('c2', 'buffered');
SELECT sc_attach('c1', 't1', 'id', 'v', '0'), sc_attach('c2', 't2', 'id', 'v', '0');
SELECT sc_incr('c1', 1, 3), sc_incr('c2', 1, 5);
});
my $attachers = q{SELECT count(*) FROM pg_stat_activity
                  WHERE backend_type = 'slotted_counter attacher'};

# c1's attachment runs first (the lower counter, neither has run); its write waits for the row.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT v FROM t1 WHERE id = 1 FOR UPDATE});
$node->safe_psql('postgres', q{SELECT sc_rollup()});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		              WHERE backend_type = 'slotted_counter attacher' AND wait_event_type = 'Lock'}),
	'the round waits in c1\'s run, having read c2\'s attachment');

# c2 attached again, to run hourly: its watermark and last attempt are reset by sc_attach.
$node->safe_psql('postgres', q{SELECT sc_attach('c2', 't2', 'id', 'v', '1 hour')});
$holder->query_safe('COMMIT');
$holder->quit;
ok($node->poll_query_until('postgres', "SELECT ($attachers) = 0"), 'the round ended');

is($node->safe_psql('postgres', q{SELECT v FROM t1}), '3', 'c1\'s run wrote once released');
is( $node->safe_psql(
		'postgres', q{SELECT every, last_run IS NULL, last_attempt IS NULL, failures
		              FROM slotted_counter.attachments WHERE target = 't2'::regclass}),
	'01:00:00|t|t|0', 'c2\'s row is as sc_attach left it: the old run was skipped, not recorded');

# Its first run, in the next round, writes everything flushed.
ok(wait_attached($node, 'postgres'), 'the next round runs it');
is($node->safe_psql('postgres', q{SELECT v FROM t2}), '5', 'and it writes what was flushed');
is( $node->safe_psql(
		'postgres', q{SELECT last_attempt IS NOT NULL FROM slotted_counter.attachments
		              WHERE target = 't2'::regclass}),
	't', 'then records its run');

$node->stop;
done_testing();
