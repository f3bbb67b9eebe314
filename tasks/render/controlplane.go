package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"hash"
	"io/fs"
	"net"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/hardening"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/kubeconfig"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/transport"
)

// controlPlaneFiles are what a control-plane node has beyond every node's files: its PKI, kubeconfigs and
// static Pods.
func (r *renderer) controlPlaneFiles(h *inventory.Host, ip string, first bool, addFile func(string, []byte, fs.FileMode)) error {
	digests := map[string]hash.Hash{}
	for _, c := range kubeadm.ControlPlaneComponents {
		digests[c+".yaml"] = sha256.New()
	}
	add := func(p string, data []byte, mode fs.FileMode) {
		for _, pod := range readers(p) {
			digests[pod].Write([]byte(p + "\x00"))
			digests[pod].Write(digested(p, data))
		}
		addFile(p, data, mode)
	}
	if err := r.controlPlanePKI(h, add); err != nil {
		return err
	}
	if err := r.controlPlaneKubeconfigs(h, ip, first, add); err != nil {
		return err
	}
	for _, f := range r.apiServerFiles {
		add(f.Path, f.Data, f.Mode)
	}
	return r.staticPods(h, ip, first, digests, add)
}

// controlPlanePKI: the CAs (keys included: the controller-manager signs kubelet certificates), the
// service-account keys, and the node's leaves.
func (r *renderer) controlPlanePKI(h *inventory.Host, add func(string, []byte, fs.FileMode)) error {
	p, tr := r.pki, r.tr
	for _, s := range pki.CAs() {
		kp := p.CAs[s.Name]
		if s.Name != "ca" {
			add(path.Join(kubeadm.PKIDir, s.Path+".crt"), tr.bundle[s.Name], modePublic)
		}
		externalEtcdCA := s.Name == "etcd-ca" && r.etcd != nil // with external etcd, its CA signs nothing here
		if kp.Key != nil && !externalEtcdCA {
			key, err := pki.EncodeKey(kp.Key)
			if err != nil {
				return err
			}
			add(path.Join(kubeadm.PKIDir, s.Path+".key"), key, modeSecret)
		}
	}
	for _, s := range pki.Signers() {
		kp := tr.signers[s.Name]
		if kp == nil || kp.Key == nil {
			continue
		}
		key, err := pki.EncodeKey(kp.Key)
		if err != nil {
			return err
		}
		add(path.Join(kubeadm.PKIDir, pki.SignerPath(s)+".crt"), pki.EncodeCert(kp.Cert), modePublic)
		add(path.Join(kubeadm.PKIDir, pki.SignerPath(s)+".key"), key, modeSecret)
	}
	saKey, err := pki.EncodeKey(tr.saKey)
	if err != nil {
		return err
	}
	add(path.Join(kubeadm.PKIDir, "sa.key"), saKey, modeSecret)
	add(path.Join(kubeadm.PKIDir, "sa.pub"), tr.saPub, modePublic)
	return r.leafFiles(h, add)
}

// leafFiles are the node's leaf certificates and keys (those its kind holds: see pki.NodeKind).
func (r *renderer) leafFiles(h *inventory.Host, add func(string, []byte, fs.FileMode)) error {
	for _, s := range r.pki.Specs[h.NodeName] {
		kp := r.pki.Nodes[h.NodeName][s.Name]
		key, err := pki.EncodeKey(kp.Key)
		if err != nil {
			return err
		}
		add(path.Join(kubeadm.PKIDir, s.Path+".crt"), pki.EncodeCert(kp.Cert), modePublic)
		add(path.Join(kubeadm.PKIDir, s.Path+".key"), key, modeSecret)
	}
	return nil
}

// controlPlaneKubeconfigs: admin.conf for kubectl on the node, super-admin.conf on the first control-plane
// node only (as kubeadm init), the node's own for the controller-manager, scheduler and kubelet.
func (r *renderer) controlPlaneKubeconfigs(h *inventory.Host, ip string, first bool, add func(string, []byte, fs.FileMode)) error {
	c := r.c
	add(kubeadm.AdminKubeconfig, r.admin, modeSecret)
	if first {
		add(kubeadm.SuperAdminConfig, r.superAdmin, modeSecret)
	}
	local := "https://" + net.JoinHostPort(ip, strconv.Itoa(c.APIServer.BindPort))
	kcDir := filepath.Join(r.o.StateDir, "kubeconfig")
	for _, id := range kubeconfig.Identities(h.NodeName, r.res.NodeEndpoint, local, false)[1:] {
		data, err := ensureKubeconfig(filepath.Join(kcDir, h.NodeName, id.File), c.Name, id, r.pki.CAs["ca"], r.tr.bundle["ca"], r.issuer, r.o.Renew, &r.res.Changes)
		if err != nil {
			return err
		}
		add(path.Join(kubeadm.KubernetesDir, id.File), data, modeSecret)
	}
	return nil
}

// staticPods are the node's etcd and control plane, each carrying the digest of the files it reads
// (PKIAnnotation), so that the kubelet restarts it when they change.
func (r *renderer) staticPods(h *inventory.Host, ip string, first bool, digests map[string]hash.Hash, add func(string, []byte, fs.FileMode)) error {
	c, o := r.c, r.o
	mp := &manifests.Params{
		ClusterName: c.Name, Images: o.Images,
		NodeName: h.NodeName, AdvertiseAddress: ip, BindPort: c.APIServer.BindPort,
		ServiceSubnet: c.Networking.ServiceSubnet, PodSubnet: c.Networking.PodSubnet, DNSDomain: c.Networking.DNSDomain,
		NodeCIDRMaskSize: c.Networking.NodeCIDRMaskSize, NodeCIDRMaskSizeIPv6: c.Networking.NodeCIDRMaskSizeIPv6, ExternalCA: r.res.ExternalCA,
		APIServer:         hardened(hardening.APIServerArgs(&c), hardening.APIServerVolumes(), c.APIServer.Component),
		ControllerManager: hardened(hardening.ControllerManagerArgs(c.Security), nil, c.ControllerManager),
		Scheduler:         hardened(hardening.SchedulerArgs(c.Security), nil, c.Scheduler),
		Etcd:              hardened(hardening.EtcdArgs(c.Security), nil, c.Etcd.Component), EtcdUser: r.etcdUser(h),
	}
	if !first {
		// A joining member: the etcd cluster of the control-plane hosts listed before it.
		for _, other := range r.cps {
			if other.Name == h.Name {
				break
			}
			mp.EtcdCluster = append(mp.EtcdCluster, manifests.EtcdMember{Name: other.NodeName,
				PeerURL: kubeadm.EtcdPeerURL(r.nodeIP(other))})
		}
	}
	if r.tr.signers != nil {
		for _, s := range pki.Signers() {
			if s.Name == pki.KubeletServingCA {
				mp.ServingSigner = pki.SignerPath(s)
			} else {
				mp.Signer = pki.SignerPath(s)
			}
		}
	}
	mp.EtcdServers = r.res.EtcdServers
	pods := manifests.All(mp)
	if r.etcd != nil {
		delete(pods, "etcd.yaml") // a systemd unit runs this host's member, if it has one
	}
	names := make([]string, 0, len(pods))
	for n, pod := range pods {
		names = append(names, n)
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[PKIAnnotation] = hex.EncodeToString(digests[n].Sum(nil))
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := manifests.Marshal(pods[n], h.NodeName)
		if err != nil {
			return err
		}
		add(path.Join(kubeadm.ManifestsDir, n), data, modeSecret)
	}
	return nil
}

// etcdMemberFiles are what a host of an external etcd cluster has for its member: the etcd CA and its
// leaves (a control-plane host has them already), the member's unit, carrying the digest of the files
// it reads only at start (etcdReadsAtStart) so that new ones restart it, and its initial cluster.
func (r *renderer) etcdMemberFiles(h *inventory.Host, ip string, files *[]transport.File, add func(string, []byte, fs.FileMode)) error {
	if !h.Has(inventory.RoleControlPlane) {
		add(path.Join(kubeadm.PKIDir, "etcd", "ca.crt"), r.tr.bundle["etcd-ca"], modePublic)
		if err := r.leafFiles(h, add); err != nil {
			return err
		}
	}
	digest := sha256.New()
	for _, f := range *files {
		if rel, ok := strings.CutPrefix(f.Path, kubeadm.PKIDir+"/"); ok && etcdReadsAtStart(rel) {
			digest.Write([]byte(f.Path + "\x00"))
			digest.Write(digested(f.Path, f.Data))
		}
	}
	c := r.c
	mp := &manifests.Params{NodeName: h.NodeName, AdvertiseAddress: ip, Etcd: hardened(hardening.EtcdArgs(c.Security), nil, c.Etcd.Component),
		EtcdUser: r.etcdUser(h)}
	if join, ok := r.o.EtcdJoin[h.Name]; ok {
		mp.EtcdCluster = join
	} else {
		for _, m := range r.etcd {
			if _, joins := r.o.EtcdJoin[m.Name]; !joins {
				mp.EtcdNew = append(mp.EtcdNew, manifests.EtcdMember{Name: m.NodeName,
					PeerURL: kubeadm.EtcdPeerURL(r.nodeIP(m))})
			}
		}
	}
	unit, err := manifests.EtcdUnit(mp, kubeadm.Binary("etcd"), hex.EncodeToString(digest.Sum(nil)))
	if err != nil {
		return err
	}
	env, err := manifests.EtcdInitialEnv(mp)
	if err != nil {
		return err
	}
	add(kubeadm.EtcdUnit, unit, modePublic)
	if !slices.Contains(r.o.EtcdMembers, h.Name) {
		add(kubeadm.EtcdInitialEnv, env, modePublic)
	}
	return nil
}

// readers are the static Pods (by manifest file) that read a control-plane node's file: the digest of what
// each reads is in its PKIAnnotation.
func readers(p string) []string {
	const (
		etcd = "etcd.yaml"
		api  = "kube-apiserver.yaml"
		cm   = "kube-controller-manager.yaml"
		sch  = "kube-scheduler.yaml"
	)
	rel, ok := strings.CutPrefix(p, kubeadm.PKIDir+"/")
	if !ok {
		if hardening.Mounted(p) {
			return []string{api}
		}
		switch path.Base(p) {
		case "controller-manager.conf":
			return []string{cm}
		case "scheduler.conf":
			return []string{sch}
		}
		return nil
	}
	switch {
	case rel == "etcd/ca.crt":
		return []string{etcd, api}
	case strings.HasPrefix(rel, "etcd/"):
		if etcdReadsAtStart(rel) {
			return []string{etcd}
		}
		return nil
	case rel == "ca.crt", rel == "front-proxy-ca.crt", rel == pki.KubeletServingCA+".crt":
		return []string{api, cm}
	case rel == "sa.key":
		return []string{api, cm}
	case strings.HasSuffix(rel, "-signer.crt"), strings.HasSuffix(rel, "-signer.key"), rel == "ca.key", rel == pki.KubeletServingCA+".key":
		return []string{cm}
	case rel == "front-proxy-ca.key":
		return nil
	}
	return []string{api} // apiserver*, front-proxy-client*, sa.pub
}

// etcdReadsAtStart tells whether etcd reads a file of pki/etcd/ only when it starts, so that a new one
// must restart it: its CA bundle, and its serving and peer keys. Its serving and peer certificates etcd
// reads again at each new connection (go.etcd.io/etcd/client/pkg/v3/transport: GetCertificate and
// GetClientCertificate load the files at every handshake), so a certificate renewed with its key kept is
// served without a restart, and a rotation keeps the member (and the API server beside it) up. A new key
// restarts it, so that no connection pairs it with the old certificate for longer than the files take to
// write. The CA's key and the health-check client's files etcd does not read.
func etcdReadsAtStart(rel string) bool {
	switch rel {
	case "etcd/ca.crt", "etcd/server.key", "etcd/peer.key":
		return true
	}
	return false
}

// digested is what a static Pod's (or etcd unit's) digest covers of a file it reads: the file, but a CA
// bundle's certificates in a fixed order. A CA rotation puts the current CA first in every bundle, so the
// swap to the new CAs reorders each bundle and changes none: etcd, which reads its bundle only at start,
// is not restarted for it (it reads its reissued serving and peer certificates at each connection), and
// the reissue stage rolls each node's API server without stopping it for an etcd restart. A file of one
// certificate is digested as it is (so digests outside a rotation are those of the code before).
func digested(p string, data []byte) []byte {
	if !pki.IsCAFile(strings.TrimPrefix(p, kubeadm.PKIDir+"/")) {
		return data
	}
	var blocks [][]byte
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		blocks = append(blocks, pem.EncodeToMemory(b))
	}
	if len(blocks) < 2 {
		return data
	}
	slices.SortFunc(blocks, bytes.Compare)
	return bytes.Join(blocks, nil)
}

func component(c inventory.Component) manifests.Component {
	var out manifests.Component
	for _, a := range c.ExtraArgs {
		out.ExtraArgs = append(out.ExtraArgs, manifests.Arg{Name: a.Name, Value: a.Value})
	}
	for _, v := range c.ExtraVolumes {
		out.ExtraVolumes = append(out.ExtraVolumes, manifests.Volume{Name: v.Name, HostPath: v.HostPath, MountPath: v.MountPath,
			ReadOnly: v.ReadOnly, Type: hostPathType(v.PathType)})
	}
	return out
}

// hardened is a component's hardening flags and mounts, then the inventory's, which may replace them.
func hardened(args []manifests.Arg, vols []manifests.Volume, c inventory.Component) manifests.Component {
	user := component(c)
	return manifests.Component{ExtraArgs: append(args, user.ExtraArgs...), ExtraVolumes: append(vols, user.ExtraVolumes...)}
}

func hostPathType(t string) corev1.HostPathType { return corev1.HostPathType(t) }
