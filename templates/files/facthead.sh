{{- /* The start of the facts scripts (facts.sh, netfacts.sh): f prints a fact, r one read from a file. */ -}}
export LC_ALL=C PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin"
f() { printf '%s\t%s\n' "$1" "$2"; }
r() { v=; [ -r "$1" ] && read -r v < "$1"; f "$2" "$v"; }
