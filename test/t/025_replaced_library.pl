# A copy of the library that is not the one the server preloaded (loaded from another path while
# the server runs) refuses every call with 55000, a message that says so and a hint to restart;
# it never touches the shared memory, and the preloaded library goes on counting. (A file
# replaced at the same path, by a package upgrade, is not read until the restart: backends are
# forked from the postmaster with the preloaded copy, and dlopen() of the same path returns it.)

use strict;
use warnings;

use File::Copy;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('replaced_library');
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
SELECT sc_incr('c', 1, 5);
});

my $libdir = $node->config_data('--pkglibdir');
my $copy = $node->basedir . '/slotted_counter_copy.so';
copy("$libdir/slotted_counter.so", $copy) or die "copy: $!";
$node->safe_psql('postgres', qq{
CREATE FUNCTION copy_incr(slotted_counter, bigint DEFAULT 0, bigint DEFAULT 1) RETURNS bigint
  AS '$copy', 'sc_incr' LANGUAGE C;
CREATE FUNCTION copy_sum(slotted_counter, bigint DEFAULT 0) RETURNS bigint
  AS '$copy', 'sc_sum' LANGUAGE C;
});

for my $call ("SELECT copy_incr('c', 1, 100)", "SELECT copy_sum('c', 1)")
{
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$call");
	isnt($rc, 0, "the copy refuses: $call");
	like($err, qr/ERROR:  55000: this slotted_counter library is not the one the server started with/,
		"55000, saying why: $call");
	like($err, qr/HINT:  Restart the server/, "with a hint to restart: $call");
}
is($node->safe_psql('postgres', q{SELECT sc_incr('c', 1, 1), sc_sum('c', 1)}), '6|6',
	'the preloaded library counts on; the copy changed nothing');

$node->stop;
done_testing();
