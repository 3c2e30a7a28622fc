# Attachments meet other people's code. As an ordinary login role that owns one schema and no
# other right, every route that used to lead to superuser, into another tenant's session, to a
# stuck flusher or to a crash: a deferred constraint trigger, a WITH HOLD cursor opened by an index
# expression, set_config(..., false) and session state (advisory locks, the random seed) left by a
# trigger, a trigger on a table that a superuser attached, a trigger that sleeps (and one that
# swallows its cancel), a target dropped during another attachment's run, the role that owns an
# attached counter dropped, an open transaction holding an attachment. Each ends in a failed (or skipped) run, shown in
# slotted_counter.attachments, with no escalation, no crash, the other counters flushing all
# along, and a fast shutdown that is fast and loses nothing.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('attach_security', qq{
slotted_counter.flush_interval = 100
slotted_counter.attach_timeout = 2000
});
my ($postmaster_pid) = slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;

# The DBA installs the extension, creates the tenants' counters and gives them away: mallory and
# alice may log in, own a schema each, and have no other right (not even CREATE on the database).
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE mallory LOGIN;
CREATE ROLE alice LOGIN;
CREATE SCHEMA mallory AUTHORIZATION mallory;
CREATE SCHEMA alice AUTHORIZATION alice;
CREATE TABLE public.victim_log (who text, role text, search_path text, read_only text,
                                pid int, advisory_locks bigint, random float8);
GRANT INSERT ON public.victim_log TO alice, mallory;
SELECT sc_create(n, 'buffered') FROM unnest(ARRAY['m_deferred', 'm_cursor', 'm_settings',
  'a_victim', 'm_sleep', 'm_dropper', 'm_dropped', 'm_stubborn', 'plain', 'dba_views']) n;
SELECT sc_alter_owner(n::slotted_counter, CASE WHEN n LIKE 'a\_%' THEN 'alice' ELSE 'mallory' END)
  FROM unnest(ARRAY['m_deferred', 'm_cursor', 'm_settings', 'a_victim', 'm_sleep', 'm_dropper',
                    'm_dropped', 'm_stubborn']) n;
});

sub as_role
{
	my ($role, $sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', $role ]);
}

sub rolsuper
{
	return $node->safe_psql('postgres',
		q{SELECT string_agg(rolname || '=' || rolsuper, ',' ORDER BY rolname) FROM pg_roles
		  WHERE rolname IN ('mallory', 'alice')});
}

sub last_error
{
	my ($counter) = @_;
	return $node->safe_psql('postgres',
		qq{SELECT coalesce(last_error, '') FROM slotted_counter.attachments
		   WHERE counter = '$counter'::slotted_counter::integer});
}

# Waits until the attachment of $counter has failed at least once.
sub wait_failed
{
	my ($counter) = @_;
	return $node->poll_query_until('postgres',
		qq{SELECT failures > 0 FROM slotted_counter.attachments
		   WHERE counter = '$counter'::slotted_counter::integer});
}

# 1. A deferred constraint trigger would fire at COMMIT, after the run: refused.
as_role('mallory', q{
CREATE TABLE mallory.t_deferred (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_deferred VALUES (1, 0);
CREATE FUNCTION mallory.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE 'ALTER ROLE mallory SUPERUSER';
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER escalate AFTER UPDATE ON mallory.t_deferred
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mallory.escalate();
SELECT sc_attach('m_deferred', 'mallory.t_deferred', 'id', 'v', '0');
SELECT sc_incr('m_deferred', 1);
});
ok(wait_failed('m_deferred'), 'deferred trigger: the run failed');
like(last_error('m_deferred'), qr/deferred trigger within security-restricted operation/,
	'deferred trigger: refused as in a security-restricted operation');
is(rolsuper(), 'alice=false,mallory=false', 'deferred trigger: no role became superuser');
is($node->safe_psql('postgres', 'SELECT v FROM mallory.t_deferred'), '0',
	'deferred trigger: the failed run changed nothing');

# 2. An index expression that opens a WITH HOLD cursor, whose query would run at COMMIT.
as_role('mallory', q{
CREATE FUNCTION mallory.payload() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE 'ALTER ROLE mallory SUPERUSER';
  RETURN 1;
END $$;
CREATE FUNCTION mallory.hold_cursor() RETURNS bool LANGUAGE sql AS
  'DECLARE held CURSOR WITH HOLD FOR SELECT mallory.payload(); SELECT true';
CREATE FUNCTION mallory.hold(bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF $1 > 0 THEN
    PERFORM mallory.hold_cursor();
  END IF;
  RETURN $1;
END $$;
CREATE TABLE mallory.t_cursor (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_cursor VALUES (1, 0);
CREATE INDEX ON mallory.t_cursor (mallory.hold(v));
SELECT sc_attach('m_cursor', 'mallory.t_cursor', 'id', 'v', '0');
SELECT sc_incr('m_cursor', 1);
});
ok(wait_failed('m_cursor'), 'WITH HOLD cursor: the run failed');
like(last_error('m_cursor'), qr/WITH HOLD within security-restricted operation/,
	'WITH HOLD cursor: refused as in a security-restricted operation');
is(rolsuper(), 'alice=false,mallory=false', 'WITH HOLD cursor: no role became superuser');

# 3. Settings changed by one tenant's trigger end with its run: the next tenant's trigger, in the
# same attacher, sees the defaults (and the database stays writable for every later run), but for
# search_path, which every run restricts to pg_catalog, pg_temp.
as_role('mallory', q{
CREATE TABLE mallory.t_settings (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_settings VALUES (1, 0);
CREATE FUNCTION mallory.meddle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('search_path', 'mallory, public', false);
  PERFORM set_config('default_transaction_read_only', 'on', false);
  PERFORM pg_advisory_lock(4242), setseed(0.42);
  INSERT INTO public.victim_log (who, role, pid) VALUES ('mallory', current_user, pg_backend_pid());
  RETURN NEW;
END $$;
CREATE TRIGGER meddle BEFORE UPDATE ON mallory.t_settings FOR EACH ROW
  EXECUTE FUNCTION mallory.meddle();
SELECT sc_attach('m_settings', 'mallory.t_settings', 'id', 'v', '0');
});
as_role('alice', q{
CREATE TABLE alice.t (id bigint PRIMARY KEY, v bigint);
INSERT INTO alice.t VALUES (1, 0);
CREATE FUNCTION alice.audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.victim_log VALUES ('alice', current_user,
    current_setting('search_path'), current_setting('default_transaction_read_only'),
    pg_backend_pid(), (SELECT count(*) FROM pg_locks
                       WHERE locktype = 'advisory' AND pid = pg_backend_pid()), random());
  RETURN NEW;
END $$;
CREATE TRIGGER audit BEFORE UPDATE ON alice.t FOR EACH ROW EXECUTE FUNCTION alice.audit();
SELECT sc_attach('a_victim', 'alice.t', 'id', 'v', '0');
});
# Both counted in one go: one round runs mallory's attachment, then alice's.
$node->safe_psql('postgres', q{SELECT sc_incr('m_settings', 1), sc_incr('a_victim', 1, 5)});
ok( $node->poll_query_until(
		'postgres', q{SELECT v = 5 FROM alice.t}),
	'settings: the victim\'s attachment ran');
is( $node->safe_psql(
		'postgres', q{SELECT who, role, search_path, read_only, advisory_locks FROM public.victim_log
		              WHERE who = 'alice' LIMIT 1}),
	'alice|alice|pg_catalog, pg_temp|off|0',
	'settings: the victim\'s trigger ran as alice, with search_path restricted as PostgreSQL 17 '
	  . 'runs maintenance commands (not mallory\'s), writable, holding no advisory lock of '
	  . 'mallory\'s');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM public.victim_log a, public.victim_log m
		              WHERE a.who = 'alice' AND m.who = 'mallory' AND a.pid = m.pid}),
	'0', 'settings: each owner\'s runs had a process of their own');
my $seeded = $node->safe_psql('postgres', q{SELECT setseed(0.42); SELECT random()});
isnt( $node->safe_psql(
		'postgres', q{SELECT random FROM public.victim_log WHERE who = 'alice' LIMIT 1}),
	$seeded, 'settings: mallory\'s random seed did not reach alice\'s trigger');
$node->safe_psql('postgres', q{SELECT sc_incr('m_settings', 1, 2), sc_incr('a_victim', 1, 5)});
ok($node->poll_query_until('postgres', q{SELECT v = 10 FROM alice.t}),
	'settings: later runs still write');
# Each owner's runs have a process of their own: mallory's may end after alice's.
ok($node->poll_query_until('postgres', q{SELECT v = 3 FROM mallory.t_settings}),
	'settings: mallory\'s own run succeeded too');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM slotted_counter.attachments
		              WHERE counter IN ('a_victim'::slotted_counter::integer,
		                                'm_settings'::slotted_counter::integer) AND failures > 0}),
	'0', 'settings: no run of either failed');

# 3b. The DBA attaches a counter to mallory's table: the run is the table owner's (mallory's), as
# VACUUM's is, so mallory's trigger does not run as the superuser; and alice may not attach to a
# table of mallory's at all, even with UPDATE on it.
as_role('mallory', q{
CREATE TABLE mallory.t_dba (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_dba VALUES (1, 0);
GRANT SELECT, UPDATE ON mallory.t_dba TO alice;
GRANT USAGE ON SCHEMA mallory TO alice;
CREATE FUNCTION mallory.grab() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'grab ran as %: %', current_user, SQLERRM;
  END;
  RAISE EXCEPTION 'grab ran as % and made mallory superuser', current_user;
END $$;
CREATE TRIGGER grab BEFORE UPDATE ON mallory.t_dba FOR EACH ROW EXECUTE FUNCTION mallory.grab();
});
$node->safe_psql('postgres',
	q{SELECT sc_attach('dba_views', 'mallory.t_dba', 'id', 'v', '0'); SELECT sc_incr('dba_views', 1)});
# The values would reach mallory's code, and she may not read the counter: no run writes them.
ok(wait_failed('dba_views'), 'DBA\'s attachment: the run failed');
is(last_error('dba_views'),
	'role "mallory", the owner of table mallory.t_dba, may not read counter "dba_views"',
	'DBA\'s attachment: refused while the table\'s owner may not read the counter');
# Granted to her (and attached again, which clears the failures), the run is hers.
$node->safe_psql('postgres', q{
SELECT sc_grant('dba_views', 'SELECT', 'mallory');
SELECT sc_attach('dba_views', 'mallory.t_dba', 'id', 'v', '0');
SELECT sc_incr('dba_views', 1);
});
ok(wait_failed('dba_views'), 'DBA\'s attachment, granted: the run failed in the trigger');
# (PostgreSQL's own message: "must be superuser ..." before 16, "permission denied to alter role")
like(last_error('dba_views'),
	qr/^grab ran as mallory: (?:must be superuser|permission denied to alter role)/,
	'DBA\'s attachment: the trigger ran as the table\'s owner, without the superuser\'s rights');
is(rolsuper(), 'alice=false,mallory=false', 'DBA\'s attachment: no role became superuser');
my ($rc, $out, $err) = $node->psql('postgres',
	q{SELECT sc_attach('a_victim', 'mallory.t_dba', 'id', 'v', '0')},
	extra_params => [ '-U', 'alice' ]);
like($err, qr/must be owner of table t_dba/,
	'alice may not attach to a table she does not own');

# 4. A trigger that sleeps for an hour: the run is cancelled at attach_timeout, and meanwhile
# every other counter flushes, and the flusher obeys pg_terminate_backend. (That sc_rollup() does
# not wait for such a run is checked in the last part, where no time limit ends it.)
as_role('mallory', q{
CREATE TABLE mallory.t_sleep (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_sleep VALUES (1, 0);
CREATE FUNCTION mallory.nap() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(3600);
  RETURN NEW;
END $$;
CREATE TRIGGER nap BEFORE UPDATE ON mallory.t_sleep FOR EACH ROW EXECUTE FUNCTION mallory.nap();
SELECT sc_attach('m_sleep', 'mallory.t_sleep', 'id', 'v', '0');
SELECT sc_incr('m_sleep', 1);
});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		              WHERE backend_type = 'slotted_counter attacher' AND wait_event = 'PgSleep'}),
	'sleep: the attacher is in the trigger');
my $flushes_before = $node->safe_psql('postgres',
	q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()});
$node->safe_psql('postgres', q{SELECT sc_incr('plain', 7, 3)});
ok( $node->poll_query_until(
		'postgres', q{SELECT value = 3 FROM slotted_counter.key_values
		              WHERE counter = 'plain'::slotted_counter::integer AND key = 7}),
	'sleep: another counter reached the table');
is( $node->safe_psql(
		'postgres', qq{SELECT flushes > $flushes_before FROM slotted_counter.stats
		               WHERE datname = current_database()}),
	't', 'sleep: the flusher went on flushing');
ok(wait_failed('m_sleep'), 'sleep: the run ended at its time limit');
like(last_error('m_sleep'), qr/took longer than slotted_counter.attach_timeout \(2000 ms\)/,
	'sleep: shown as a time-out');
my $flusher = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'slotted_counter flusher'});
$node->safe_psql('postgres', "SELECT pg_terminate_backend($flusher)");
ok( $node->poll_query_until(
		'postgres', qq{SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $flusher}),
	'sleep: the flusher obeys pg_terminate_backend');

# 5. A trigger that swallows the cancel: its process ends a second later, and the next attacher
# records the run as failed.
as_role('mallory', q{
CREATE TABLE mallory.t_stubborn (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_stubborn VALUES (1, 0);
CREATE FUNCTION mallory.stubborn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  LOOP
    BEGIN
      PERFORM pg_sleep(10);
    EXCEPTION WHEN query_canceled THEN
      NULL;
    END;
  END LOOP;
END $$;
CREATE TRIGGER stubborn BEFORE UPDATE ON mallory.t_stubborn FOR EACH ROW
  EXECUTE FUNCTION mallory.stubborn();
SELECT sc_attach('m_stubborn', 'mallory.t_stubborn', 'id', 'v', '0');
SELECT sc_incr('m_stubborn', 1);
});
ok(wait_failed('m_stubborn'), 'stubborn: the run was ended');
like(last_error('m_stubborn'), qr/ignored the cancel .* ended with its process/,
	'stubborn: shown as ended with its process');

# 6. A trigger that drops the target of an attachment run after it in the same round: that run
# fails cleanly, and the dropped table takes its attachment with it.
as_role('mallory', q{
CREATE TABLE mallory.t_dropped (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_dropped VALUES (1, 0);
CREATE TABLE mallory.t_dropper (id bigint PRIMARY KEY, v bigint);
INSERT INTO mallory.t_dropper VALUES (1, 0);
CREATE FUNCTION mallory.drop_other() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DROP TABLE IF EXISTS mallory.t_dropped;
  RETURN NEW;
END $$;
CREATE TRIGGER drop_other BEFORE UPDATE ON mallory.t_dropper FOR EACH ROW
  EXECUTE FUNCTION mallory.drop_other();
SELECT sc_attach('m_dropper', 'mallory.t_dropper', 'id', 'v', '0');
SELECT sc_attach('m_dropped', 'mallory.t_dropped', 'id', 'v', '0');
SELECT sc_incr('m_dropper', 1), sc_incr('m_dropped', 1);
});
ok( $node->poll_query_until(
		'postgres', q{SELECT v = 1 FROM mallory.t_dropper}),
	'dropped target: the dropping run itself succeeded');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM slotted_counter.attachments
		              WHERE counter = 'm_dropped'::slotted_counter::integer}),
	'0', 'dropped target: its attachment went with the table');
# Another session drops an attached table between two runs.
as_role('mallory', q{DROP TABLE mallory.t_deferred});
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM slotted_counter.attachments
		              WHERE counter = 'm_deferred'::slotted_counter::integer}),
	'0', 'dropped target: a table dropped by a session takes its attachment too');

# 7. The role that owns an attached counter (and its table) cannot be dropped while it does
# (2BP01); once REASSIGN OWNED gave both to another role, the attachment runs as the table's new
# owner, which may read the counter it now owns.
$node->safe_psql(
	'postgres', q{
CREATE ROLE passing LOGIN;
CREATE ROLE passing_team;
CREATE TABLE public.t_passing (id bigint PRIMARY KEY, v bigint);
INSERT INTO public.t_passing VALUES (1, 0);
ALTER TABLE public.t_passing OWNER TO passing;
SELECT sc_create('p_counter', 'buffered');
SELECT sc_alter_owner('p_counter', 'passing');
});
as_role('passing', q{SELECT sc_attach('p_counter', 'public.t_passing', 'id', 'v', '0')});
($rc, $out, $err) = $node->psql('postgres', q{\set VERBOSITY verbose
DROP ROLE passing;});
like($err, qr/ERROR:  2BP01: .*\nDETAIL: (?s:.*)^owner of sequence slotted_counters\.p_counter$/m,
	'owning role: DROP ROLE refused, naming the counter');
$node->safe_psql('postgres', q{
REASSIGN OWNED BY passing TO passing_team;
DROP ROLE passing;
SELECT sc_incr('p_counter', 1, 9);
});
ok($node->poll_query_until('postgres', q{SELECT v = 9 FROM public.t_passing}),
	'owning role: after REASSIGN OWNED and DROP ROLE, the run writes as the table\'s owner');
is(last_error('p_counter'), '', 'owning role: no error shown');

# 8. A transaction of mallory's holds her attachment's row (an sc_attach not committed): that run is
# skipped, and alice's attachments go on.
my $holder = $node->background_psql('postgres', extra_params => [ '-U', 'mallory' ]);
$holder->query_safe(q{BEGIN; SELECT sc_attach('m_settings', 'mallory.t_settings', 'id', 'v', '0')});
$node->safe_psql('postgres', q{SELECT sc_incr('a_victim', 1, 100)});
ok($node->poll_query_until('postgres', q{SELECT v = 110 FROM alice.t}),
	'open transaction: the other tenant\'s attachment still runs');
$holder->query_safe('ROLLBACK');
$holder->quit;

is(rolsuper(), 'alice=false,mallory=false', 'after every route, no role is superuser');
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'after every route, no process crashed');
my ($pid_now) = slurp_file($node->data_dir . '/postmaster.pid') =~ /^(\d+)/;
is($pid_now, $postmaster_pid, 'after every route, the same postmaster runs (no crash restart)');
is($node->safe_psql('postgres', q{SELECT attach_errors > 0 FROM slotted_counter.stats
                                  WHERE datname = current_database()}),
	't', 'the failed runs were counted');

# With no time limit, a trigger that sleeps for an hour holds its run for as long as the test
# lasts: sc_rollup() returns meanwhile, and a fast shutdown ends without waiting for the trigger
# (else pg_ctl gives up and the test fails) and loses no acknowledged increment. An attacher reads
# the limit as it starts: one started before a new session sees the new limit is ended, and only
# one started after is watched.
$node->append_conf('postgresql.conf', 'slotted_counter.attach_timeout = 0');
$node->reload;
ok( $node->poll_query_until(
		'postgres', q{SELECT current_setting('slotted_counter.attach_timeout') = '0'}),
	'shutdown: the time limit is off');
my $limit_off_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
$node->safe_psql('postgres', q{SELECT sc_detach('m_stubborn', 'mallory.t_stubborn')});
$node->safe_psql('postgres', qq{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                                WHERE backend_type = 'slotted_counter attacher'
                                  AND backend_start < '$limit_off_at'});
$node->safe_psql('postgres', q{SELECT sc_incr('m_sleep', 1, 5)});
my $sleeping_attacher = qq{SELECT count(*) FROM pg_stat_activity
                          WHERE backend_type = 'slotted_counter attacher' AND wait_event = 'PgSleep'
                            AND backend_start > '$limit_off_at'};
ok($node->poll_query_until('postgres', $sleeping_attacher, '1'),
	'shutdown: an attacher with no time limit is in the sleeping trigger');
$node->safe_psql('postgres',
	q{SELECT sc_incr('plain', g % 10, 1) FROM generate_series(1, 1000) g});
# A rollup that waited for the run would not return before the trigger's hour: the psql time-out
# fails the test instead.
$node->safe_psql('postgres', q{SELECT sc_rollup()},
	timeout => $PostgreSQL::Test::Utils::timeout_default);
is($node->safe_psql('postgres', $sleeping_attacher),
	'1', 'shutdown: sc_rollup() returned while the trigger sleeps');
$node->stop('fast');
ok(!-e $node->data_dir . '/postmaster.pid',
	'shutdown: a fast stop ended while the trigger slept');
$node->start;
is($node->safe_psql('postgres', q{SELECT sc_sum_keys('plain', ARRAY(SELECT generate_series(0, 9)::bigint))}),
	'1003', 'shutdown: every acknowledged increment survived');

unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no process crashed');

$node->stop;
done_testing();
