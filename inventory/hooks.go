package inventory

import (
	"fmt"
	"slices"
	"strings"
)

// Hooks are commands of the inventory's author run on hosts before and after what each command does there:
// up and add-node (before: once preflight passed, before anything is pushed; after: the node Ready),
// remove-node (before the drain; after the reset), upgrade (inside each node's drain window: before and
// after its kubelet is upgraded), reboot (inside each node's drain window: before the reboot and after
// the node is back) and reset (before and after the reset). They run as the connection runs
// everything (become), with CLUSTERCTL_HOST, CLUSTERCTL_COMMAND and CLUSTERCTL_HOOK (before, after) in
// their environment; nothing else is ever put into them.
type Hooks struct {
	// Up: before, once preflight passed and before anything is pushed; after, once every node is Ready.
	Up HookPoints `yaml:"up,omitempty" json:"up,omitzero"`
	// AddNode: as up's, on the hosts added only.
	AddNode HookPoints `yaml:"addNode,omitempty" json:"addNode,omitzero"`
	// RemoveNode: before, before the node is cordoned and drained; after, once it is reset (on the hosts
	// removed).
	RemoveNode HookPoints `yaml:"removeNode,omitempty" json:"removeNode,omitzero"`
	// Upgrade: inside each node's drain window, before its kubelet is upgraded and after it is Ready.
	Upgrade HookPoints `yaml:"upgrade,omitempty" json:"upgrade,omitzero"`
	// Reboot: inside each node's drain window, before it reboots (patch the OS here: "patch, then
	// reboot" is one command) and after it is back and Ready, before it is uncordoned.
	Reboot HookPoints `yaml:"reboot,omitempty" json:"reboot,omitzero"`
	// Reset: before and after clusterctl's own reset of each host.
	Reset HookPoints `yaml:"reset,omitempty" json:"reset,omitzero"`
}

// IsZero lets omitempty drop hooks not given.
func (h Hooks) IsZero() bool {
	return h.Up.IsZero() && h.AddNode.IsZero() && h.RemoveNode.IsZero() && h.Upgrade.IsZero() && h.Reboot.IsZero() && h.Reset.IsZero()
}

// The commands hooks run around, as Hooks.Of and CLUSTERCTL_COMMAND name them.
const (
	HookUp         = "up"
	HookAddNode    = "add-node"
	HookRemoveNode = "remove-node"
	HookUpgrade    = "upgrade"
	HookReboot     = "reboot"
	HookReset      = "reset"
)

// Of is the hook points of a command (HookUp, ...); the zero value for any other.
func (h Hooks) Of(command string) HookPoints {
	switch command {
	case HookUp:
		return h.Up
	case HookAddNode:
		return h.AddNode
	case HookRemoveNode:
		return h.RemoveNode
	case HookUpgrade:
		return h.Upgrade
	case HookReboot:
		return h.Reboot
	case HookReset:
		return h.Reset
	}
	return HookPoints{}
}

// HookPoints are the commands run before and after.
type HookPoints struct {
	// Before are the hooks run before clusterctl's work, in order; one that fails stops the run unless it
	// says onFailure: continue.
	Before []Hook `yaml:"before,omitempty" json:"before,omitempty"`
	// After are the hooks run after it, in order.
	After []Hook `yaml:"after,omitempty" json:"after,omitempty"`
}

// IsZero lets omitempty drop an empty pair.
func (p HookPoints) IsZero() bool { return len(p.Before) == 0 && len(p.After) == 0 }

// Hook is one command: written as a string, or as a mapping with the roles it runs on and what a failure
// does.
type Hook struct {
	// Run is the command, run by sh -c on the host.
	Run string `yaml:"run" json:"run"`
	// Roles limits an inventory-wide hook to hosts with one of these roles (default: every host).
	Roles []Role `yaml:"roles,omitempty" json:"roles,omitempty"`
	// OnFailure is stop (default: the command fails, naming the host, the hook and its stderr) or
	// continue (a warning).
	OnFailure string `yaml:"onFailure,omitempty" json:"onFailure,omitempty"`
}

// MarshalYAML writes a hook with nothing but its command as a string.
func (h Hook) MarshalYAML() (any, error) {
	if len(h.Roles) == 0 && h.OnFailure == "" {
		return h.Run, nil
	}
	type plain Hook
	return plain(h), nil
}

// Hook failure policies.
const (
	HookStop     = "stop"
	HookContinue = "continue"
)

// HooksFor is what runs on h at a point of a command (when: "before" or "after"): the inventory's hooks for
// h's roles, then h's own.
func (inv *Inventory) HooksFor(h *Host, command, when string) []Hook {
	pick := func(p HookPoints) []Hook {
		if when == "before" {
			return p.Before
		}
		return p.After
	}
	var out []Hook
	for _, hk := range pick(inv.Hooks.Of(command)) {
		if len(hk.Roles) == 0 || slices.ContainsFunc(hk.Roles, h.Has) {
			out = append(out, hk)
		}
	}
	return append(out, pick(h.Hooks.Of(command))...)
}

// maxHook bounds a hook's command (it travels on a command line).
const maxHook = 64 << 10

// hooks checks each hook: a command, roles that exist (only inventory-wide hooks choose hosts by role), a
// failure policy of stop or continue.
func (v *validator) hooks(key string, h Hooks, top bool) {
	for _, c := range []struct {
		name string
		p    HookPoints
	}{{"up", h.Up}, {"addNode", h.AddNode}, {"removeNode", h.RemoveNode}, {"upgrade", h.Upgrade}, {"reboot", h.Reboot}, {"reset", h.Reset}} {
		for _, w := range []struct {
			when string
			list []Hook
		}{{"before", c.p.Before}, {"after", c.p.After}} {
			for i, hk := range w.list {
				when := w.when
				k := fmt.Sprintf("%s.%s.%s[%d]", key, c.name, when, i)
				switch {
				case strings.TrimSpace(hk.Run) == "":
					v.errorf(k+".run", "a hook needs a command to run")
				case len(hk.Run) > maxHook:
					v.errorf(k+".run", "is %d bytes; a hook may be %d at most (put a longer script on the host and run it)", len(hk.Run), maxHook)
				}
				if len(hk.Roles) > 0 && !top {
					v.errorf(k+".roles", "a host's own hooks run on it: roles choose hosts only in the inventory-wide hooks")
				}
				for j, r := range hk.Roles {
					if r != RoleControlPlane && r != RoleWorker && r != RoleEtcd {
						v.errorf(fmt.Sprintf("%s.roles[%d]", k, j), "%q is not a role (control-plane, worker, etcd)", r)
					}
				}
				if hk.OnFailure != "" && hk.OnFailure != HookStop && hk.OnFailure != HookContinue {
					v.errorf(k+".onFailure", "%q is not stop or continue", hk.OnFailure)
				}
			}
		}
	}
}
