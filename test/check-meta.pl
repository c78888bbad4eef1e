#!/usr/bin/perl
# Checks META.json, the PGXN distribution metadata, against the PGXN Meta
# Spec 1.0.0 (required fields, their types, no keys outside the spec but
# x_ ones, semantic versions, files that exist) and against cpht.control:
# the distribution's version and the cpht extension's version must be the
# control file's default_version (0.2 is written 0.2.0 in META.json).
#
#   test/check-meta.pl            from the repository root; exits 1 on any problem
use strict;
use warnings;
use JSON::PP;

my @problems;
sub problem { push @problems, join('', @_) }

sub slurp {
	my ($path) = @_;
	open(my $fh, '<', $path) or die "check-meta: cannot read $path: $!\n";
	local $/;
	return <$fh>;
}

my $meta = eval { JSON::PP->new->relaxed(0)->decode(slurp('META.json')) };
die "check-meta: META.json is not valid JSON: $@" unless $meta;
die "check-meta: META.json is not a JSON object\n" unless ref $meta eq 'HASH';

my $semver = qr/^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$/;
my $term = qr/^[^\/\\\s[:cntrl:]]{2,}$/;
my %license_strings = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd
	freebsd gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1
	openssl perl_5 postgresql qpl_1_0 ssleay sun zlib open_source restricted unrestricted unknown);
my %top = map { $_ => 1 } qw(name abstract description version maintainer license provides
	prereqs release_status resources generated_by tags no_index meta-spec);

sub nonempty_string { defined $_[0] && !ref $_[0] && length $_[0] > 0 }

for my $key (qw(name abstract version maintainer license provides meta-spec)) {
	problem("required field '$key' is missing") unless exists $meta->{$key};
}
for my $key (sort keys %$meta) {
	problem("key '$key' is not in the spec (custom keys start with x_)")
		unless $top{$key} || $key =~ /^x_/i;
}
problem("name must be a term") unless nonempty_string($meta->{name}) && $meta->{name} =~ $term;
for my $key (qw(abstract description generated_by)) {
	problem("$key must be a non-empty string")
		if exists $meta->{$key} && !nonempty_string($meta->{$key});
}
problem("version '", $meta->{version} // '', "' is not a semantic version")
	unless nonempty_string($meta->{version}) && $meta->{version} =~ $semver;

my $maint = $meta->{maintainer};
problem("maintainer must be a string or a list of strings")
	unless nonempty_string($maint)
	|| (ref $maint eq 'ARRAY' && @$maint && !grep { !nonempty_string($_) } @$maint);

my $lic = $meta->{license};
if (ref $lic eq 'HASH') {
	problem("license map must name licenses with URIs") unless %$lic && !grep { !nonempty_string($_) } values %$lic;
} else {
	my @l = ref $lic eq 'ARRAY' ? @$lic : ($lic);
	problem("license must be a map or a list of license strings") unless @l;
	for (@l) {
		problem("license '", $_ // '', "' is not a PGXN license string")
			unless nonempty_string($_) && $license_strings{$_};
	}
}

my $spec = $meta->{'meta-spec'};
problem("meta-spec.version must be 1.0.0")
	unless ref $spec eq 'HASH' && ($spec->{version} // '') eq '1.0.0';

if (exists $meta->{release_status}) {
	problem("release_status must be stable, testing or unstable")
		unless ($meta->{release_status} // '') =~ /^(stable|testing|unstable)$/;
}
if (exists $meta->{tags}) {
	problem("tags must be a list of tags (under 256 characters, no slash, backslash or control character)")
		unless ref $meta->{tags} eq 'ARRAY'
		&& !grep { !nonempty_string($_) || length $_ >= 256 || /[\/\\[:cntrl:]]/ } @{ $meta->{tags} };
}
if (exists $meta->{prereqs}) {
	my $pr = $meta->{prereqs};
	if (ref $pr ne 'HASH') {
		problem("prereqs must be a map");
	} else {
		for my $phase (sort keys %$pr) {
			problem("prereqs phase '$phase' is not configure, build, test, runtime or develop")
				unless $phase =~ /^(configure|build|test|runtime|develop)$/ || $phase =~ /^x_/i;
			next unless ref $pr->{$phase} eq 'HASH';
			for my $rel (sort keys %{ $pr->{$phase} }) {
				problem("prereqs relationship '$rel' is not requires, recommends, suggests or conflicts")
					unless $rel =~ /^(requires|recommends|suggests|conflicts)$/ || $rel =~ /^x_/i;
				my $set = $pr->{$phase}{$rel};
				next unless ref $set eq 'HASH';
				for my $ext (sort keys %$set) {
					my $range = $set->{$ext} // '';
					# a version, 0 (any), or comma-separated comparisons
					my $ok = $range eq '0' || $range =~ $semver
						|| !grep { !/^\s*(<|<=|>|>=|==|!=)\s*\S+\s*$/ || !(/(\S+)\s*$/ && ($1 eq '0' || $1 =~ $semver)) }
						split /,/, $range;
					problem("prereqs $phase $rel $ext: '$range' is not a version range") unless $ok;
				}
			}
		}
	}
}
if (exists $meta->{resources}) {
	problem("resources must be a map") unless ref $meta->{resources} eq 'HASH';
}

# provides: every extension with a version and a file that exists
my $provides = $meta->{provides};
if (ref $provides ne 'HASH' || !%$provides) {
	problem("provides must name at least one extension");
	$provides = {};
}
for my $ext (sort keys %$provides) {
	my $p = $provides->{$ext};
	problem("provides key '$ext' must be a term") unless $ext =~ $term;
	if (ref $p ne 'HASH') {
		problem("provides.$ext must be a map");
		next;
	}
	for my $key (sort keys %$p) {
		problem("provides.$ext.$key is not in the spec")
			unless $key =~ /^(file|version|abstract|docfile)$/ || $key =~ /^x_/i;
	}
	problem("provides.$ext.version is not a semantic version")
		unless nonempty_string($p->{version}) && $p->{version} =~ $semver;
	for my $key (qw(file docfile)) {
		next unless exists $p->{$key} || $key eq 'file';
		problem("provides.$ext.$key '", $p->{$key} // '', "' is not a file of the distribution")
			unless nonempty_string($p->{$key}) && $p->{$key} !~ m{^/} && -f $p->{$key};
	}
}

# The release and the extension it installs by default have one version.
my ($default) = slurp('cpht.control') =~ /^\s*default_version\s*=\s*'([^']*)'/m;
if (!defined $default) {
	problem("cpht.control has no default_version");
} else {
	my @parts = split /\./, $default;
	push @parts, 0 while @parts < 3;
	my $want = join('.', @parts);
	problem("META.json version '", $meta->{version} // '', "' is not cpht.control's default_version '$default' ($want)")
		unless ($meta->{version} // '') eq $want;
	problem("META.json provides.cpht.version '", $provides->{cpht}{version} // '',
		"' is not cpht.control's default_version '$default' ($want)")
		unless ref $provides->{cpht} eq 'HASH' && ($provides->{cpht}{version} // '') eq $want;
}

if (@problems) {
	print STDERR "check-meta: META.json: $_\n" for @problems;
	exit 1;
}
print "check-meta: META.json follows the PGXN Meta Spec 1.0.0 and has version $meta->{version}, as cpht.control's default_version '$default'\n";
