package playbooks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestTokenKeyID(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := keyID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if len(kid) != 43 { // base64url of 32 bytes, unpadded
		t.Errorf("key ID %q", kid)
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + kid + `"}`))
	for _, token := range []string{header + ".e30.c2ln", header + ".", header + "\n"} {
		if got := tokenKeyID(token); got != kid {
			t.Errorf("tokenKeyID(%q) = %q, want %q", token, got, kid)
		}
	}
	for _, bad := range []string{"", "not-base64!.x.y", base64.RawURLEncoding.EncodeToString([]byte("[]")) + ".x"} {
		if got := tokenKeyID(bad); got != "" {
			t.Errorf("tokenKeyID(%q) = %q", bad, got)
		}
	}
}

func TestMountsToken(t *testing.T) {
	withToken := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}}}
	without := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	if !mountsToken(withToken) || mountsToken(without) {
		t.Error("mountsToken")
	}
}
