set -e
[ -d /var/lib/etcd ] || exit 0
chown -R 999:998 /var/lib/etcd
chmod 0700 /var/lib/etcd
