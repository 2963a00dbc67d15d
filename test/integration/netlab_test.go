package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// netLab is a network of namespaces for one fault run: each member (a
// node, the NATS server) in a namespace of its own with one address,
// linked through a bridge in a namespace of its own, and this process
// reaching them through one more link into the bridge. No namespace has a
// route anywhere else. Faults are nft rules and a tbf qdisc inside a
// member's namespace; close removes everything the lab made.
type netLab struct {
	t       *testing.T
	tag     string // in every name the lab makes, so runs never collide
	subnet  string // "10.213.N", a /24
	bridge  string // the bridge's namespace
	hostEnd string // this process's end of its link into the bridge
	members map[string]*labMember
}

type labMember struct {
	name, ns, ip string
	// faulted: the member's namespace has the lab's nft table or qdisc
	faulted bool
}

// labAvailable says why network namespaces cannot be used here ("" when
// they can): the suite then runs its faults that need none on loopback.
func labAvailable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	for _, tool := range []string{"ip", "nft", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not installed"
		}
	}
	return ""
}

// newNetLab makes the namespaces of members (names of at most 6 letters).
func newNetLab(t *testing.T, members ...string) *netLab {
	t.Helper()
	r := rand.Uint32()
	l := &netLab{
		t:       t,
		tag:     fmt.Sprintf("%04x", r&0xffff),
		subnet:  fmt.Sprintf("10.213.%d", 1+r%250),
		members: map[string]*labMember{},
	}
	t.Cleanup(l.close)
	l.bridge = "cepf-" + l.tag + "-br"
	l.run("ip", "netns", "add", l.bridge)
	l.run("ip", "-n", l.bridge, "link", "add", "br0", "type", "bridge")
	l.run("ip", "-n", l.bridge, "link", "set", "br0", "up")
	for i, name := range members {
		m := &labMember{name: name, ns: "cepf-" + l.tag + "-" + name, ip: fmt.Sprintf("%s.%d", l.subnet, i+1)}
		l.members[name] = m
		l.run("ip", "netns", "add", m.ns)
		l.link(m.ns, i, m.ip)
		l.run("ip", "-n", m.ns, "link", "set", "lo", "up")
	}
	// this process's link: its address is .254, on this side
	l.hostEnd = "cf" + l.tag + "h"
	l.run("ip", "link", "add", l.hostEnd, "type", "veth", "peer", "name", l.hostEnd+"b")
	l.run("ip", "link", "set", l.hostEnd+"b", "netns", l.bridge)
	l.run("ip", "-n", l.bridge, "link", "set", l.hostEnd+"b", "master", "br0", "up")
	l.run("ip", "addr", "add", l.subnet+".254/24", "dev", l.hostEnd)
	l.run("ip", "link", "set", l.hostEnd, "up")
	return l
}

// link gives namespace ns the address ip on eth0, linked to the bridge.
func (l *netLab) link(ns string, i int, ip string) {
	a, b := fmt.Sprintf("cf%s%02da", l.tag, i), fmt.Sprintf("cf%s%02db", l.tag, i)
	l.run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
	l.run("ip", "link", "set", a, "netns", ns)
	l.run("ip", "-n", ns, "link", "set", a, "name", "eth0")
	l.run("ip", "-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
	l.run("ip", "-n", ns, "link", "set", "eth0", "up")
	l.run("ip", "link", "set", b, "netns", l.bridge)
	l.run("ip", "-n", l.bridge, "link", "set", b, "master", "br0", "up")
}

func (l *netLab) run(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// ip is a member's address.
func (l *netLab) ip(name string) string { return l.members[name].ip }

// command runs bin in a member's namespace (ip netns exec replaces itself
// with bin, so the process is bin's: a kill reaches it).
func (l *netLab) command(name, bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.members[name].ns, bin}, args...)...)
}

// nft adds rules to the member's table "cepf", made with an input and an
// output chain at its first use.
func (l *netLab) nft(name string, rules ...string) {
	m := l.members[name]
	if !m.faulted {
		l.run("ip", "netns", "exec", m.ns, "nft", "add table inet cepf")
		l.run("ip", "netns", "exec", m.ns, "nft", "add chain inet cepf in { type filter hook input priority 0 ; }")
		l.run("ip", "netns", "exec", m.ns, "nft", "add chain inet cepf out { type filter hook output priority 0 ; }")
		m.faulted = true
	}
	for _, r := range rules {
		l.run("ip", "netns", "exec", m.ns, "nft", "add rule inet cepf "+r)
	}
}

// cut drops every packet between member name and the members others, both
// ways (a partition as name's side sees it).
func (l *netLab) cut(name string, others ...string) {
	var ips []string
	for _, o := range others {
		ips = append(ips, l.ip(o))
	}
	set := "{ " + strings.Join(ips, ", ") + " }"
	l.nft(name, "in ip saddr "+set+" drop", "out ip daddr "+set+" drop")
}

// lossy drops pct % of the member's packets each way, and limits what it
// sends to rate (a tbf qdisc: "2mbit").
func (l *netLab) lossy(name string, pct int, rate string) {
	l.nft(name, fmt.Sprintf("in numgen random mod 100 < %d drop", pct), fmt.Sprintf("out numgen random mod 100 < %d drop", pct))
	l.run("ip", "netns", "exec", l.members[name].ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms")
}

// heal removes the member's faults.
func (l *netLab) heal(name string) {
	m := l.members[name]
	if !m.faulted {
		return
	}
	// either may be absent
	exec.Command("ip", "netns", "exec", m.ns, "nft", "delete table inet cepf").Run()
	exec.Command("ip", "netns", "exec", m.ns, "tc", "qdisc", "del", "dev", "eth0", "root").Run()
	m.faulted = false
}

// close removes the namespaces and links (the processes in them are the
// caller's to end first); deleting a namespace deletes the links in it,
// and with them their other ends.
func (l *netLab) close() {
	exec.Command("ip", "link", "del", l.hostEnd).Run()
	for _, m := range l.members {
		exec.Command("ip", "netns", "del", m.ns).Run()
	}
	exec.Command("ip", "netns", "del", l.bridge).Run()
}
