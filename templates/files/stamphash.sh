{{- /* Shared by facts.sh and stamp.sh: what a host's stamp holds of the files it lists. */ -}}
# stamp_format: how stat prints the state of a file a stamp lists: its inode, size and times (a file
# rewritten, replaced, touched or removed since prints otherwise).
stamp_format='%n %i %s %y %z'
# stamp_hash PATHS: in h, the digest of what stat prints (errors included) for the files PATHS lists one per
# line. The facts script prints that output itself, and facts.ParseFacts takes the same digest of it.
stamp_hash() { set -f; o=$IFS; IFS='
'; h=$(stat -c "$stamp_format" -- $1 2>&1 | sha256sum); IFS=$o; set +f; h=${h%% *}; }
