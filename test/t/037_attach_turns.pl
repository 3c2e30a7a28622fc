# Table owners take turns: one owner's slow attachments delay another owner's by one run at most.
# alice owns eight tables whose triggers take a second each; bob owns one whose trigger is quick.
# In the round that has all nine due, bob's run comes after at most one of alice's (the order of
# runs is read from a log the triggers write, not from the clock); alice's all run too.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('attach_turns', "slotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE alice; CREATE ROLE bob;
GRANT CREATE ON DATABASE postgres TO alice, bob;
GRANT CREATE ON SCHEMA public TO alice, bob;
CREATE TABLE runs (n bigserial, owner text NOT NULL);
GRANT INSERT ON runs TO alice, bob;
GRANT USAGE ON SEQUENCE runs_n_seq TO alice, bob;
CREATE FUNCTION slow_run() RETURNS trigger LANGUAGE plpgsql SECURITY INVOKER AS $$
BEGIN
  INSERT INTO public.runs (owner) VALUES (current_user);
  PERFORM pg_sleep(1);
  RETURN NULL;
END $$;
CREATE FUNCTION quick_run() RETURNS trigger LANGUAGE plpgsql SECURITY INVOKER AS $$
BEGIN
  INSERT INTO public.runs (owner) VALUES (current_user);
  RETURN NULL;
END $$;
});

# alice: eight counters, each attached to a table of its own with the slow trigger.
for my $i (1 .. 8)
{
	$node->safe_psql('postgres', qq{
SET ROLE alice;
CREATE TABLE a$i (id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO a$i (id) VALUES (1);
CREATE TRIGGER slow AFTER UPDATE ON a$i FOR EACH STATEMENT EXECUTE FUNCTION slow_run();
SELECT sc_create('a$i', 'buffered');
SELECT sc_attach('a$i', 'a$i', 'id', 'n', '1 hour');
});
}
$node->safe_psql('postgres', q{
SET ROLE bob;
CREATE TABLE b (id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
INSERT INTO b (id) VALUES (1);
CREATE TRIGGER quick AFTER UPDATE ON b FOR EACH STATEMENT EXECUTE FUNCTION quick_run();
SELECT sc_create('b', 'buffered');
SELECT sc_attach('b', 'b', 'id', 'n', '1 hour');
});

# All nine count; once flushed, all nine are made due in the same round (the attacher may have
# run them before, when they had nothing to write).
$node->safe_psql('postgres', q{
SET ROLE alice;
SELECT sc_incr('a1', 1), sc_incr('a2', 1), sc_incr('a3', 1), sc_incr('a4', 1),
       sc_incr('a5', 1), sc_incr('a6', 1), sc_incr('a7', 1), sc_incr('a8', 1);
SET ROLE bob;
SELECT sc_incr('b', 1);
});
# Rounds started before (the increments make them due) end first; TRUNCATE waits for a run still
# writing the log.
ok(wait_attached($node, 'postgres'), 'the rounds of the increments ran');
$node->safe_psql('postgres', q{
TRUNCATE runs;
UPDATE slotted_counter.attachments SET last_attempt = NULL, last_run = NULL;
});
ok(wait_attached($node, 'postgres'), 'every attachment ran');

is($node->safe_psql('postgres', q{SELECT count(*) FILTER (WHERE owner = 'alice') || ',' ||
  count(*) FILTER (WHERE owner = 'bob') FROM runs}), '8,1', "alice's eight runs and bob's one");
cmp_ok(
	$node->safe_psql('postgres', q{
SELECT count(*) FROM runs WHERE owner = 'alice' AND n < (SELECT n FROM runs WHERE owner = 'bob')}),
	'<=', 1, "at most one of alice's slow runs came before bob's");
is($node->safe_psql('postgres', q{SELECT a1.n + a8.n + b.n FROM a1, a8, b}), '3',
	'the tables have the values');

$node->stop;
done_testing();
