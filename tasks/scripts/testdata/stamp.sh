export LC_ALL=C
umask 077
# stamp_hash PATHS: in h, the digest of the state of the files PATHS lists one per line: each one's inode,
# size and times (a file rewritten, replaced, touched or removed since changes it).
stamp_hash() { set -f; o=$IFS; IFS='
'; h=$(stat -c '%n %i %s %y %z' -- $1 2>&1 | sha256sum); IFS=$o; set +f; h=${h%% *}; }

paths='/etc/kubernetes/clusterctl-cluster
/etc/kubernetes/kubelet.conf'
stamp_hash "$paths"
st=/var/lib/clusterctl/stamp
mkdir -p "${st%/*}"
printf 'v1 %s %s %s\n%s\n' 0123abcd "$h" /etc/clusterctl/pod-routes "$paths" > "$st.tmp" && sync "$st.tmp" && mv -f "$st.tmp" "$st"
