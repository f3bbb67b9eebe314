package facts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/transport"
)

func loadFacts(t *testing.T) *Facts {
	t.Helper()
	out, err := os.ReadFile("testdata/facts-debian12-nspawn.txt")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFacts("cp1", out)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseFacts(t *testing.T) {
	f := loadFacts(t)
	if f.Hostname != "cp1" || f.OS != "debian" || f.OSVersion != "12" || f.Arch != "amd64" || f.CgroupVersion != 1 ||
		f.CPUs != 2 || f.MemoryKB != 24682416 || f.UID != 0 || !f.CRISocket || f.CRIAnswers != "ok" || !f.BrNetfilter ||
		f.IPForward != "0" || f.KubeletUnit != "not-found" || !f.HostResolves || f.Virt != "systemd-nspawn" {
		t.Errorf("facts: %+v", f)
	}
	if !f.ListensOn(22) || f.ListensOn(6443) || !f.HasAddress("10.250.0.10") || f.MACs["host0"] != "ca:9e:c5:53:77:1a" {
		t.Errorf("listening %v, addresses %v, macs %v", f.Listening, f.Addresses, f.MACs)
	}
	want := []Listener{{"0.0.0.0", 22}, {"127.0.0.1", 41739}, {"::", 22}}
	if !reflect.DeepEqual(f.Listening, want) {
		t.Errorf("listening %v, want %v", f.Listening, want)
	}
	if got := f.Clock.UnixNano(); got != 1795316443304143880 {
		t.Errorf("clock %d", got)
	}
	if _, err := ParseFacts("x", []byte("garbage\n")); err == nil {
		t.Error("garbage parsed as facts")
	}
}

// An established connection (state 01 in /proc/net/tcp{,6}, the remote address) says the host reaches that
// address and port; an IPv4 peer of an IPv6 socket is the same address.
func TestConnectedTo(t *testing.T) {
	out := "hostname\tw1\nkernel\t6.1.0\nconn\t0A00FA0A:192B\nconn\t0000000000000000FFFF00000B00FA0A:094C\n" +
		"conn\t000080FE0000000000000000FF000000:094B\nconn\tnot-an-address\n"
	f, err := ParseFacts("w1", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ip   string
		port int
		want bool
	}{
		{"10.250.0.10", 6443, true}, {"10.250.0.10", 2379, false}, {"10.250.0.12", 6443, false},
		{"10.250.0.11", 2380, true}, {"fe80::ff", 2379, true}, {"fe80::ff", 2380, false}, {"nonsense", 6443, false},
	} {
		if got := f.ConnectedTo(c.ip, c.port); got != c.want {
			t.Errorf("ConnectedTo(%s, %d) = %v, want %v (connections %v)", c.ip, c.port, got, c.want, f.Connections)
		}
	}
}

// Facts are the host's word: a value that ends up in a file clusterctl writes is taken only when it is one
// clusterctl expects.
func TestHostileFacts(t *testing.T) {
	out := "hostname\tcp1\nkernel\t6.1.0\ncni_bin_dir\t/tmp/x\" ]\nbin_dir = \"/tmp\n"
	f, err := ParseFacts("cp1", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if f.CNIBinDir != "" {
		t.Errorf("CNI directory %q taken from the host", f.CNIBinDir)
	}
	f, _ = ParseFacts("cp1", []byte("hostname\tcp1\nkernel\t6.1.0\ncni_bin_dir\t/usr/lib/cni\n"))
	if f.CNIBinDir != "/usr/lib/cni" {
		t.Errorf("a known CNI directory refused: %q", f.CNIBinDir)
	}
	// A CA certificate the size of a disk is kept only up to its bound.
	big := "hostname\tcp1\nkernel\t6.1.0\n" + strings.Repeat("ca_cert\t"+strings.Repeat("A", 64)+"\n", 10000)
	if f, _ = ParseFacts("cp1", []byte(big)); len(f.CACert) > maxCACert {
		t.Errorf("CA certificate kept at %d bytes", len(f.CACert))
	}
}

// slowHost answers the facts script with recorded facts and date(1) with its clock, skew ahead of this
// machine's, after a delay on each side of the host reading it; the facts script prints the clock first
// (its first output arrives a delay after the host read it), then takes four delays more.
type slowHost struct {
	facts []byte
	skew  time.Duration
	delay time.Duration
	dates int
}

func (h *slowHost) Name() string { return "cp1" }

func (h *slowHost) Run(_ context.Context, command string, _ []byte) (transport.Result, error) {
	time.Sleep(h.delay)
	now := time.Now().Add(h.skew)
	time.Sleep(h.delay)
	first := time.Now()
	if command != "date +%s.%N" {
		time.Sleep(4 * h.delay)
		var out []byte
		out = fmt.Appendf(out, "clock\t%d.%09d\n", now.Unix(), now.Nanosecond())
		for _, l := range strings.SplitAfter(string(h.facts), "\n") {
			if !strings.HasPrefix(l, "clock\t") {
				out = append(out, l...)
			}
		}
		return transport.Result{Stdout: out, FirstStdout: first}, nil
	}
	h.dates++
	return transport.Result{Stdout: fmt.Appendf(nil, "%d.%09d\n", now.Unix(), now.Nanosecond()), FirstStdout: first}, nil
}

// The clock is read as the facts script's first output, or, when that output came too late to tell the
// time well (a slow host) and the reading cannot tell whether the skew is above what the caller reports, in
// exchanges of its own: the skew is right within its uncertainty however long the facts script took, and
// the uncertainty is half the round trip of the read kept.
func TestGatherFactsReadsTheClock(t *testing.T) {
	out, err := os.ReadFile("testdata/facts-debian12-nspawn.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		delay, skew, tell time.Duration
		reads             int
	}{
		{time.Millisecond, -600 * time.Millisecond, SkewReported, 0},
		{20 * time.Millisecond, -600 * time.Millisecond, SkewReported, 0},
		// A window of 520 ms: -600 ms ± 260 ms is under a second whatever the clock is.
		{260 * time.Millisecond, -600 * time.Millisecond, SkewReported, 0},
		// -900 ms ± 260 ms may be over a second, and -600 ms ± 260 ms over 500 ms: read again.
		{260 * time.Millisecond, -900 * time.Millisecond, SkewReported, clockReads},
		{260 * time.Millisecond, -600 * time.Millisecond, 500 * time.Millisecond, clockReads},
	} {
		h := &slowHost{facts: out, skew: c.skew, delay: c.delay}
		f, err := GatherFacts(context.Background(), h, "unix:///run/containerd/containerd.sock", true, Ask{}, c.tell)
		if err != nil {
			t.Fatal(err)
		}
		if d := (f.ClockSkew - h.skew).Abs(); d > f.ClockUncertainty || f.ClockUncertainty < c.delay {
			t.Errorf("delay %s, skew %s: measured %s ± %s", c.delay, h.skew, f.ClockSkew, f.ClockUncertainty)
		}
		if h.dates != c.reads {
			t.Errorf("delay %s, skew %s, telling %s: the clock was read alone %d times, want %d", c.delay, h.skew, c.tell, h.dates, c.reads)
		}
		if f.Hostname != "cp1" {
			t.Errorf("delay %s: facts %+v", c.delay, f)
		}
	}
}

// A host's addresses as its facts show them: the first global one of each family on the default route's
// interface (any interface without one), IPv4 first, link-local and loopback never.
func TestFactsNodeIPs(t *testing.T) {
	f := &Facts{Addresses: []Address{{Iface: "lo", CIDR: "127.0.0.1/8"}, {Iface: "host0", CIDR: "fe80::1/64"},
		{Iface: "host0", CIDR: "fdcc::10/64"}, {Iface: "host0", CIDR: "10.0.0.10/24"}, {Iface: "cni0", CIDR: "10.244.0.1/24"}}}
	if got := f.NodeIPs().String(); got != "10.0.0.10,fdcc::10" {
		t.Errorf("NodeIPs() = %q, want 10.0.0.10,fdcc::10", got)
	}
	f.DefaultIface = "eth1"
	f.Addresses = append(f.Addresses, Address{Iface: "eth1", CIDR: "2001:db8::5/64"})
	if got := f.NodeIPs().String(); got != "2001:db8::5" {
		t.Errorf("NodeIPs() with the default route on eth1 = %q, want 2001:db8::5", got)
	}
}

// The facts profile cis reads: the etcd user and group, a free system ID, the kernel's settings; values that
// are not what they claim are dropped.
func TestCISFacts(t *testing.T) {
	out := "hostname\tcp1\nkernel\t6.1\netcd_user\t998\netcd_group\t997\nfree_system_id\t996\n" +
		"kernel_setting\tvm/overcommit_memory 0\nkernel_setting\tkernel/panic 10\nkernel_setting\tkernel/panic_on_oops $(id)\n" +
		"kernel_setting\tnet/ipv4/ip_forward 1\nsysctl_rw\tyes\n"
	f, err := ParseFacts("cp1", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid, ok := f.Accounts.EtcdIDs(); !ok || uid != 998 || gid != 997 {
		t.Errorf("etcd IDs %d:%d %v", uid, gid, ok)
	}
	if f.KernelSettings["vm.overcommit_memory"] != "0" || f.KernelSettings["kernel.panic"] != "10" || f.KernelSettings["kernel.panic_on_oops"] != "" ||
		len(f.KernelSettings) != 3 || !f.SysctlWritable {
		t.Errorf("kernel settings %v, writable %v", f.KernelSettings, f.SysctlWritable)
	}
	for _, a := range []Accounts{{EtcdUID: -1, EtcdGID: -1, FreeSystemID: 999}, {EtcdUID: 5, EtcdGID: 6}} {
		if _, _, ok := a.EtcdIDs(); !ok {
			t.Errorf("%+v: no etcd IDs", a)
		}
	}
}

// A host is settled for a plan only with a stamp of that plan's digest, its files' state unchanged since
// and no pod route missing; a stamp of another version or shape is not one. Each reason is its own.
func TestUnsettled(t *testing.T) {
	base := "hostname\tcp1\nkernel\t6.1\n"
	// stat's output for the files a stamp lists, between its marks; s1 its digest (stampState).
	stat := func(out string) string { return stampStatBegin + "\n" + out + stampStatEnd + "\n" }
	out1 := "/etc/a 12 5 2026-12-07 17:36:54.690504154 +0000 2026-12-07 17:36:54.734504154 +0000\nstat: cannot statx '/etc/b': No such file or directory\n"
	sum := sha256.Sum256([]byte(out1))
	s1 := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		out, want string
	}{
		{"stamp\tv1 abc " + s1 + " /etc/routes\n" + stat(out1) + "routes_missing\t0\n", ""},
		{"stamp\tv1 abc " + s1 + " -\n" + stat(out1), ""},
		{"stamp\tv1 abc " + s1 + " -\n" + stat(strings.Replace(out1, " 5 ", " 6 ", 1)), "a file its stamp lists changed since"},
		{"stamp\tv1 abc " + s1 + " -\n" + strings.TrimSuffix(stat(out1), stampStatEnd+"\n"), "a file its stamp lists changed since"}, // cut short
		{"stamp\tv1 abd " + s1 + " -\n" + stat(out1), "its stamp is of another plan"},
		{"stamp\tv1 abc " + s1 + " /etc/routes\n" + stat(out1) + "routes_missing\t2\n", "the kernel lacks 2 of its pod routes"},
		{"stamp\tv1 abc " + s1 + " /etc/routes\n" + stat(out1) + "routes_missing\tx\n", "the kernel lacks 1 of its pod routes"}, // not a count
		{"stamp\tv2 abc " + s1 + " -\n" + stat(out1), "a stamp this clusterctl does not read"},
		{"stamp\tv1 abc " + s1 + "\n" + stat(out1), "a stamp this clusterctl does not read"},
		{stat(""), "no stamp (a new host, or no run finished there since its last push)"},
	} {
		f, err := ParseFacts("cp1", []byte(base+c.out))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Unsettled("abc"); got != c.want {
			t.Errorf("%q: %q, want %q", c.out, got, c.want)
		}
	}
	if f, _ := ParseFacts("cp1", []byte(base+"stamp\tv1  "+s1+" -\n"+stat(out1))); f.Unsettled("") == "" {
		t.Error("an empty digest settles a host")
	}
}
