{{- /* Shared by facts.sh and stamp.sh: what a host's stamp holds of the files it lists. */ -}}
# stamp_hash PATHS: in h, the digest of the state of the files PATHS lists one per line: each one's inode,
# size and times (a file rewritten, replaced, touched or removed since changes it).
stamp_hash() { set -f; o=$IFS; IFS='
'; h=$(stat -c '%n %i %s %y %z' -- $1 2>&1 | sha256sum); IFS=$o; set +f; h=${h%% *}; }
