# The move of docs/guides/moving-a-counter-table.md, under writers that never stop. Writers count
# page views into the table (an upsert) or, once "switched", into the counter; every seventh view
# is undone by a savepoint's rollback, and each view that stays is logged in its transaction.
# 1. The trigger and the copy in one transaction under the table's lock, while writers run: the
#    counter equals the table; then some writers switch to sc_incr and every view counts once;
#    then they move back (the trigger dropped and the counter copied into the table in one
#    transaction) and the table holds every view.
# 2. The trigger alone first, then the copy in ranges locked FOR UPDATE, while writers run: the
#    counter equals the table.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('moving_in', '');

$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE TABLE control (stop boolean NOT NULL);
CREATE TABLE app_log (page_id bigint NOT NULL, via text NOT NULL);
CREATE FUNCTION write_view(p bigint, via text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF via = 'table' THEN
    INSERT INTO page_counts AS c VALUES (p, 1)
      ON CONFLICT (page_id) DO UPDATE SET views = c.views + 1;
  ELSE
    PERFORM sc_incr('page_views', p, 1);
  END IF;
  INSERT INTO app_log VALUES (p, via);
END $$;
-- Views until control says stop: pages 1 to 2,100 (the last 100 new), every seventh undone.
CREATE PROCEDURE app_writes(via text) LANGUAGE plpgsql AS $$
DECLARE
  i bigint := 0;
  p bigint;
BEGIN
  LOOP
    i := i + 1;
    p := 1 + (random() * 2099)::bigint;
    IF i % 7 = 0 THEN
      BEGIN
        PERFORM write_view(p, via);
        RAISE EXCEPTION 'undone';
      EXCEPTION WHEN raise_exception THEN NULL;
      END;
    ELSE
      PERFORM write_view(p, via);
    END IF;
    COMMIT;
    EXIT WHEN (SELECT stop FROM control);
  END LOOP;
END $$;
-- The guide's trigger.
CREATE FUNCTION page_counts_forward() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND (TG_OP = 'DELETE' OR OLD.page_id <> NEW.page_id) THEN
        PERFORM sc_incr('page_views', OLD.page_id, -OLD.views);
        IF TG_OP = 'UPDATE' THEN
            PERFORM sc_incr('page_views', NEW.page_id, NEW.views);
        END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF NEW.views <> OLD.views THEN
            PERFORM sc_incr('page_views', NEW.page_id, NEW.views - OLD.views);
        END IF;
    ELSE
        PERFORM sc_incr('page_views', NEW.page_id, NEW.views);
    END IF;
    RETURN NULL;
END
$$;
});

# A fresh table of 2,000 pages (page g has g * 10 views), the counter, an empty log.
sub fresh
{
	$node->safe_psql('postgres', q{
DROP TABLE IF EXISTS page_counts;
SELECT sc_drop('page_views', if_exists => true);
CREATE TABLE page_counts (page_id bigint PRIMARY KEY, views bigint NOT NULL DEFAULT 0);
INSERT INTO page_counts SELECT g, g * 10 FROM generate_series(1, 2000) g;
SELECT sc_create('page_views', 'transactional');
TRUNCATE app_log, control;
INSERT INTO control VALUES (false);
});
}

my @writers;

sub start_writer
{
	my ($via) = @_;
	my %w = (out => '', err => '');
	$w{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', "CALL app_writes('$via')" ],
		'>', \$w{out}, '2>', \$w{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	push @writers, \%w;
}

# Waits until `n` more views are logged (through `via`, or any) than now.
sub wait_for_views
{
	my ($n, $via) = @_;
	my $filter = defined $via ? "WHERE via = '$via'" : '';
	my $now = $node->safe_psql('postgres', "SELECT count(*) FROM app_log $filter");
	$node->poll_query_until('postgres',
		"SELECT count(*) >= $now + $n FROM app_log $filter")
	  or die "no views logged";
}

sub stop_writers
{
	$node->safe_psql('postgres', 'UPDATE control SET stop = true');
	my $errors = '';
	for my $w (@writers)
	{
		$w->{h}->finish;
		$errors .= $w->{err};
	}
	@writers = ();
	return $errors;
}

# Pages whose `what` (an expression of `page_id`) is not the initial views plus the logged ones.
sub differing
{
	my ($what) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM (
  SELECT g AS page_id, CASE WHEN g <= 2000 THEN g * 10 ELSE 0 END
                       + (SELECT count(*) FROM app_log l WHERE l.page_id = g) AS expected
    FROM generate_series(1, 2100) g) e
 WHERE $what <> expected});
}

# 1. The copy in one transaction, the switch, the move back.
fresh();
start_writer('table') for 1 .. 2;
wait_for_views(200);
$node->safe_psql('postgres', q{
BEGIN;
LOCK TABLE page_counts IN SHARE ROW EXCLUSIVE MODE;
CREATE TRIGGER page_counts_forward AFTER INSERT OR UPDATE OR DELETE ON page_counts
    FOR EACH ROW EXECUTE FUNCTION page_counts_forward();
SELECT count(sc_set('page_views', page_id, views)) FROM page_counts;
COMMIT;
});
wait_for_views(300);
is($node->safe_psql('postgres', q{
BEGIN;
LOCK TABLE page_counts IN SHARE MODE;
SELECT count(*) FROM page_counts WHERE views <> sc_sum('page_views', page_id);
COMMIT;}), '0', 'after the copy, under writers, every row equals its key (guide step 4)');

start_writer('counter');
wait_for_views(300, 'counter');
wait_for_views(300, 'table');
is(stop_writers(), '', 'the writers ran without an error');
is(differing(q{sc_sum('page_views', page_id)}), '0',
	'every view counted once, through the table and its trigger or sc_incr');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM sc_top('page_views', 9223372036854775807) t
 WHERE t.key > 2100 OR t.key < 1}), '0', 'and no other key has a value');

# Moving back: writers are back on the table when the counter is copied into it.
$node->safe_psql('postgres', 'UPDATE control SET stop = false');
start_writer('table') for 1 .. 2;
wait_for_views(200);
$node->safe_psql('postgres', q{
BEGIN;
DROP TRIGGER page_counts_forward ON page_counts;
UPDATE page_counts p SET views = sc_sum('page_views', p.page_id)
WHERE views <> sc_sum('page_views', p.page_id);
INSERT INTO page_counts (page_id, views)
SELECT key, value FROM sc_top('page_views', 9223372036854775807)
ON CONFLICT (page_id) DO NOTHING;
COMMIT;
});
wait_for_views(300);
is(stop_writers(), '', 'the writers ran without an error while the counter moved back');
is(differing(q{coalesce((SELECT views FROM page_counts c WHERE c.page_id = e.page_id), 0)}), '0',
	'after moving back the table holds every view');

# 2. The trigger first, then the copy in ranges, each locking its rows.
fresh();
start_writer('table') for 1 .. 2;
wait_for_views(200);
$node->safe_psql('postgres', q{
CREATE TRIGGER page_counts_forward AFTER INSERT OR UPDATE OR DELETE ON page_counts
    FOR EACH ROW EXECUTE FUNCTION page_counts_forward();
});
for my $from (map { $_ * 300 + 1 } 0 .. 7)
{
	my $to = $from + 299;
	$node->safe_psql('postgres', qq{
SELECT count(sc_set('page_views', page_id, views))
FROM (SELECT page_id, views FROM page_counts
      WHERE page_id BETWEEN $from AND $to ORDER BY page_id FOR UPDATE) AS batch});
	wait_for_views(20);
}
wait_for_views(300);
is(stop_writers(), '', 'the writers ran without an error during the copy in ranges');
is(differing(q{sc_sum('page_views', page_id)}), '0',
	'after the copy in ranges every key holds its views');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM page_counts WHERE views <> sc_sum('page_views', page_id)}), '0',
	'and equals its row');

done_testing();
