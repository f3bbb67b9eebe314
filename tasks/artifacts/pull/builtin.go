package pull

// builtinDigests are upstream release files' SHA-256 digests that are public facts, by the lock's key (the
// file's version and its path in an artifacts directory): a pull checks them before it trusts what a
// server (or its checksum file) says.
//
// Source: kubespray's roles/kubespray_defaults/vars/main/checksums.yml (kubernetes-sigs/kubespray, commit
// 005bdce7f186), which records the checksum files each project publishes beside its release files: the
// kubelet_checksums and kubectl_checksums tables (the .sha256 files dl.k8s.io publishes beside each
// binary), runc_checksums (runc.sha256sum of each runc release) and crictl_checksums (the .sha256 of each
// cri-tools archive). What that table does not cover for the versions clusterctl pulls (Kubernetes 1.35.2
// and later, 1.36, 1.37; containerd's static archives; etcd 3.6; the CNI plugins 1.9.0; crictl 1.36 and
// 1.37; images) relies on the lock and --checksums.
var builtinDigests = map[string]string{
	"kubernetes v1.35.0 bin/linux-amd64/kubelet": "2f4ed7778681649b81244426c29c5d98df60ccabf83d561d69e61c1cbb943ddf",
	"kubernetes v1.35.0 bin/linux-arm64/kubelet": "aa658d077348b43d238f50966a583f4244b2a7d45590c77b3b165b7d44983ab8",
	"kubernetes v1.35.0 bin/linux-amd64/kubectl": "a2e984a18a0c063279d692533031c1eff93a262afcc0afdc517375432d060989",
	"kubernetes v1.35.0 bin/linux-arm64/kubectl": "58f82f9fe796c375c5c4b8439850b0f3f4d401a52434052f2df46035a8789e25",
	"kubernetes v1.35.1 bin/linux-amd64/kubelet": "e7343310e03ff0d424df4397bdfa4468947d6d1f0f93dac586c1e8d6e4086d5d",
	"kubernetes v1.35.1 bin/linux-arm64/kubelet": "73475c6db8fd8a9780b1b378fa2f917875e6146166c24603c1abc6eafd4493a8",
	"kubernetes v1.35.1 bin/linux-amd64/kubectl": "36e2f4ac66259232341dd7866952d64a958846470f6a9a6a813b9117bd965207",
	"kubernetes v1.35.1 bin/linux-arm64/kubectl": "706256e21a4e9192ee62d1a007ac0bfcff2b0b26e92cc7baad487a6a5d08ff82",
	// runc 1.3.4, the runc clusterctl pairs with every Kubernetes version it supports.
	"runc v1.3.4 runtime/linux-amd64/runc": "5966ca40b6187b30e33bfc299c5f1fe72e8c1aa01cf3fefdadf391668f47f103",
	"runc v1.3.4 runtime/linux-arm64/runc": "d6dcab36d1b6af1b72c7f0662e5fcf446a291271ba6006532b95c4144e19d428",
	// crictl 1.35.0, the crictl of Kubernetes 1.35.
	"downloads/crictl-v1.35.0-linux-amd64.tar.gz": "2e141e5b22cb189c40365a11807d69b76b9b3caced89fac2f4ec879408ce2177",
	"downloads/crictl-v1.35.0-linux-arm64.tar.gz": "519071de89b64c43e2a1661bb5489c6c3fd5e9e5fcef75e50e542b0c891f1118",
}
