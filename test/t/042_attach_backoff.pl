# An attachment that keeps failing (here: its table went to a role that may not read the counter)
# backs off: after three failures in a row it is tried no sooner
# than a minute after the last, then two, four... up to an hour, instead of at every flush, and
# so logged a few times, not once a flush. Its first success ends the backoff.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Utils;
use Test::More;
use SlottedCounterTest;

my $node = preloaded_node('attach_backoff', "slotted_counter.flush_interval = 0\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE app LOGIN;
GRANT CREATE ON DATABASE postgres TO app;
GRANT CREATE ON SCHEMA public TO app;
SET ROLE app;
SELECT sc_create('views', 'buffered');
CREATE TABLE public.posts (id bigint PRIMARY KEY, views bigint);
INSERT INTO public.posts VALUES (1, 0);
SELECT sc_attach('views', 'public.posts', 'id', 'views', '0');
RESET ROLE;
SELECT sc_incr('views', 1, 5);
});
is(wait_attached($node, 'postgres'), 1, 'the attachment ran');
is($node->safe_psql('postgres', 'SELECT views FROM public.posts'), '5', 'it wrote');

# The table changes hands: its new owner may not read the counter, and every run fails.
$node->safe_psql('postgres', q{
CREATE ROLE outsider;
ALTER TABLE public.posts OWNER TO outsider;});

# Counts and flushes until three runs failed in a row (each flush starts the attacher).
my $failures = 0;
for (my $i = 0; $i < 200 && $failures < 3; $i++)
{
	$failures = $node->safe_psql('postgres', q{
SELECT sc_incr('views', 1, 1); SELECT sc_rollup() >= 0;
SELECT pg_sleep(0.05);
SELECT failures FROM slotted_counter.attachments});
	$failures = (split /\n/, $failures)[-1];
}
is($failures, '3', 'the run failed three times in a row');
my $third = $node->safe_psql('postgres', 'SELECT last_attempt FROM slotted_counter.attachments');

# Many more flushes: a fourth attempt, if any, comes a minute after the third at the soonest.
for (1 .. 30)
{
	$node->safe_psql('postgres',
		q{SELECT sc_incr('views', 1, 1); SELECT sc_rollup() >= 0; SELECT pg_sleep(0.05)});
}
is( $node->safe_psql('postgres', qq{
SELECT failures = 3 OR last_attempt >= '$third'::timestamptz + '1 minute'
FROM slotted_counter.attachments}),
	't', 'after three failures, no attempt within a minute of the last, whatever the flushes');
my $logged = () = slurp_file($node->logfile) =~ /attachment of counter "views" to .* failed/g;
ok($logged >= 1 && $logged <= 4, "the failure was logged $logged times, not at every flush");

# The cause goes; the next attempt (made due by hand here, as an hour's wait would be) succeeds and
# ends the backoff.
$node->safe_psql('postgres', q{
ALTER TABLE public.posts OWNER TO app;
UPDATE slotted_counter.attachments SET last_attempt = now() - interval '2 hours'});
is(wait_attached($node, 'postgres'), 1, 'the attachment ran again');
is( $node->safe_psql('postgres',
		q{SELECT failures, last_error IS NULL FROM slotted_counter.attachments}),
	'0|t', 'its success ended the failures');
is( $node->safe_psql('postgres',
		q{SELECT views = sc_sum('views', 1) FROM public.posts}),
	't', 'and it wrote the current value');

$node->stop;
done_testing();
