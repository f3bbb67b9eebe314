package mirror_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/clusterctl/clusterctl/test/lab/image"
	"github.com/clusterctl/clusterctl/test/lab/mirror"
)

// An image of a multi-image archive pushed under another name is the same image in the registry.
func TestImageRegistryPush(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	reg, err := mirror.StartImageRegistry("127.0.0.1", tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	archive := filepath.Join(t.TempDir(), "all.tar")
	base := []image.File{{Path: "/etc/os", Data: []byte("lab\n")}}
	if err := image.WriteAll(archive, []image.Image{
		{Ref: "registry.k8s.io/e2e-test-images/a:1", Layers: [][]image.File{base}},
		{Ref: "registry.k8s.io/e2e-test-images/b:2", Layers: [][]image.File{base, {{Path: "/b", Data: []byte("b")}}}},
	}); err != nil {
		t.Fatal(err)
	}
	dst := reg.Addr + "/e2e-test-images/b:2"
	if err := reg.Push(t.Context(), archive, "registry.k8s.io/e2e-test-images/b:2", dst); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.NewTag(dst)
	img, err := remote.Image(ref, remote.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}))
	if err != nil {
		t.Fatal(err)
	}
	if layers, err := img.Layers(); err != nil || len(layers) != 2 {
		t.Errorf("pulled b:2 has %d layers (%v), want 2", len(layers), err)
	}
	if err := reg.Push(t.Context(), archive, "registry.k8s.io/e2e-test-images/c:3", reg.Addr+"/c:3"); err == nil {
		t.Error("pushing an image the archive does not hold succeeded")
	}
}
