package pull

// builtinDigests are upstream release files' SHA-256 digests that are public facts, by Kubernetes version
// and the file's path in an artifacts directory: a pull checks them before it trusts what a server (or its
// checksum file) says. Source: the kubelet_checksums and kubectl_checksums tables of kubespray's
// roles/kubespray_defaults/vars/main/checksums.yml (kubernetes-sigs/kubespray, commit 005bdce7f186), which
// records the .sha256 files dl.k8s.io publishes beside each binary. Versions that table does not cover yet
// (1.36, 1.37 when this was written) rely on the lock and --checksums.
var builtinDigests = map[string]map[string]string{
	"v1.35.0": {
		"bin/linux-amd64/kubelet": "2f4ed7778681649b81244426c29c5d98df60ccabf83d561d69e61c1cbb943ddf",
		"bin/linux-arm64/kubelet": "aa658d077348b43d238f50966a583f4244b2a7d45590c77b3b165b7d44983ab8",
		"bin/linux-amd64/kubectl": "a2e984a18a0c063279d692533031c1eff93a262afcc0afdc517375432d060989",
		"bin/linux-arm64/kubectl": "58f82f9fe796c375c5c4b8439850b0f3f4d401a52434052f2df46035a8789e25",
	},
	"v1.35.1": {
		"bin/linux-amd64/kubelet": "e7343310e03ff0d424df4397bdfa4468947d6d1f0f93dac586c1e8d6e4086d5d",
		"bin/linux-arm64/kubelet": "73475c6db8fd8a9780b1b378fa2f917875e6146166c24603c1abc6eafd4493a8",
		"bin/linux-amd64/kubectl": "36e2f4ac66259232341dd7866952d64a958846470f6a9a6a813b9117bd965207",
		"bin/linux-arm64/kubectl": "706256e21a4e9192ee62d1a007ac0bfcff2b0b26e92cc7baad487a6a5d08ff82",
	},
}
