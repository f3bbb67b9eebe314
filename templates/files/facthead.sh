{{- /* The start of the facts scripts (facts.sh, netfacts.sh): f adds a fact to the output, r one read from a
file; the output goes in one write at the end (sshd sends what each write brings as a packet of its own). A
command's output is gone through by lines split on nl (IFS=$nl; set -f; for l in $out), not read from a
here-document: sh's read takes a byte per system call, ~2 µs each on a busy host; ws is the usual IFS. */ -}}
export LC_ALL=C PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin"
nl='
' ws=$IFS
fo=
f() { fo="$fo$1	$2$nl"; }
r() { v=; [ -r "$1" ] && read -r v < "$1"; f "$2" "$v"; }
