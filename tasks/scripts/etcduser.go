package scripts

import (
	"strconv"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

// EtcdUser is the user and group an etcd member runs as under profile cis.
type EtcdUser struct{ UID, GID int }

// Owner is "uid:gid", as chown and stat -c %u:%g have it.
func (u EtcdUser) Owner() string { return strconv.Itoa(u.UID) + ":" + strconv.Itoa(u.GID) }

// EtcdUserMade marks a host whose etcd user and group setup made: reset removes them.
const EtcdUserMade = kubeadm.StateDir + "/etcd-user-made"

// EtcdDataOwner gives etcd's data directory and everything in it to u, 0700: run while the member is
// stopped, before it starts again as u (what it wrote as root meanwhile is u's too).
func EtcdDataOwner(u EtcdUser) string {
	return render("etcd-data-owner.sh", struct {
		Dir, Owner string
	}{kubeadm.EtcdDataDir, u.Owner()})
}
