# A failed attachment run records in last_attempt when it began, as a successful run does
# (docs/reference/attachments.md: "when the last run, successful or not, started"), not when its
# failure was written down. A waiter for "a run later than now" (attachments.md, "Waiting for
# attachments") must not take a run that began before it, and failed on what it met then, for a
# later one. The run here begins, waits for a row a user's transaction holds, and then fails in a
# trigger of the table that a flag, set while it waited, makes raise.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# Attachers only after sc_rollup(): nothing runs but what the test starts.
my $node = preloaded_node('attach_failure_time', "slotted_counter.flush_interval = 0\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE TABLE mirror (id bigint PRIMARY KEY, views bigint NOT NULL DEFAULT 0);
INSERT INTO mirror (id) VALUES (1);
CREATE TABLE flags (fail boolean NOT NULL);
INSERT INTO flags VALUES (false);
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT fail FROM public.flags) THEN RAISE EXCEPTION 'refused by the flag'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse BEFORE UPDATE ON mirror FOR EACH ROW EXECUTE FUNCTION refuse();
SELECT sc_create('c', 'buffered');
SELECT sc_attach('c', 'mirror', 'id', 'views', '0');
SELECT sc_incr('c', 1, 3);
});

my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT views FROM mirror WHERE id = 1 FOR UPDATE});
$node->safe_psql('postgres', q{SELECT sc_rollup()});
my $waiting = q{FROM pg_stat_activity
                WHERE backend_type = 'slotted_counter attacher' AND wait_event_type = 'Lock'};
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 $waiting"),
	'the run began and waits for the row');
my $began = $node->safe_psql('postgres', "SELECT xact_start $waiting");
$node->safe_psql('postgres', 'UPDATE flags SET fail = true');
$holder->query_safe('COMMIT');
ok($node->poll_query_until('postgres', q{SELECT failures = 1 FROM slotted_counter.attachments}),
	'the run failed in the trigger, and its failure was recorded');
is( $node->safe_psql(
		'postgres', qq{SELECT last_attempt = '$began'::timestamptz, last_error
		               FROM slotted_counter.attachments}),
	't|refused by the flag',
	'its last_attempt is when its transaction began, while it waited, not when it failed');

# A waiter from a later moment waits for a run that begins after it, which writes.
$node->safe_psql('postgres', 'UPDATE flags SET fail = false');
$holder->quit;
ok(wait_attached($node, 'postgres'), 'a later run');
is($node->safe_psql('postgres', q{SELECT views FROM mirror}), '3', 'wrote the value');
is($node->safe_psql('postgres', q{SELECT failures FROM slotted_counter.attachments}), '0',
	'and cleared the failure');

done_testing();
