package playbooks

import (
	"context"
	"fmt"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/charts"
)

// addons installs the inventory's add-ons (cluster.addons) once every node is Ready: what is missing is
// installed, what changed upgraded, the rest left alone, and the add-ons clusterctl installed that left
// the inventory uninstalled. The pod network add-on is the network step's. A dry run shows each change
// with the diff of its values.
func (u *upRun) addons(ctx context.Context, p *plan) error {
	return u.applyAddons(ctx, p, "addons", addonsStepPicks(u.o.DryRun))
}

// addonsStepPicks chooses the add-ons of the addons step: all but the pod network, which is the network
// step's; a dry run shows it here too (the network step runs no dry run).
func addonsStepPicks(dryRun bool) func(*inventory.Addon) bool {
	return func(a *inventory.Addon) bool { return !a.Network || dryRun }
}

// networkStepPicks chooses the network step's add-on: the pod network.
func networkStepPicks(a *inventory.Addon) bool { return a.Network }

func (u *upRun) noAddons(p *plan) string {
	// add-ons installed earlier and taken out of the inventory are uninstalled: a running cluster is asked
	if len(u.e.Inv.Cluster.Addons) == 0 && !u.running(p, p.cp1) {
		return "no add-ons in the inventory (cluster.addons)"
	}
	return ""
}

// networkAddon installs the pod network add-on (network: true, with cni.plugin: none) in the network
// step, before anything waits for Nodes to be Ready.
func (u *upRun) networkAddon(ctx context.Context, p *plan) error {
	return u.applyAddons(ctx, p, "network", networkStepPicks)
}

// applyAddons plans every add-on (so that none of those pick leaves out is taken for removed) and carries
// out the changes of those pick chooses; uninstalls only in the addons step.
func (u *upRun) applyAddons(ctx context.Context, p *plan, step string, pick func(*inventory.Addon) bool) error {
	desired, err := charts.Desire(u.e.Inv, p.artDir, p.manifest, nil)
	if err != nil {
		return err
	}
	admin, err := u.e.Admin(ctx)
	if err != nil && u.o.DryRun {
		u.sayWouldInstall(step, desired, pick)
		return nil
	}
	if err != nil {
		return err
	}
	c := charts.NewClient(admin)
	changes, err := c.Plan(ctx, desired)
	if err != nil {
		if u.o.DryRun && !u.running(p, p.cp1) {
			u.sayWouldInstall(step, desired, pick)
			return nil
		}
		return err
	}
	mine := stepChanges(u.e.Inv, changes, step, pick)
	for _, ch := range mine {
		u.sayChange(step, ch)
	}
	u.res.Addons = append(u.res.Addons, mine...)
	if u.o.DryRun {
		return nil
	}
	return c.Apply(ctx, mine, func(addon, format string, args ...any) {
		u.e.say(step, "", "add-on %s: %s", addon, fmt.Sprintf(format, args...))
	})
}

// stepChanges are the changes of a plan that step carries out, in the plan's order: the add-ons pick
// chooses (installs, upgrades, unchanged), and in the addons step the uninstalls.
func stepChanges(inv *inventory.Inventory, changes []charts.Change, step string, pick func(*inventory.Addon) bool) []charts.Change {
	var mine []charts.Change
	for _, ch := range changes {
		a := addonNamed(inv, ch.Name)
		switch {
		case ch.Action == charts.Uninstall && step == "addons":
		case a != nil && pick(a) && ch.Action != charts.Uninstall:
		default:
			continue
		}
		mine = append(mine, ch)
	}
	return mine
}

func addonNamed(inv *inventory.Inventory, name string) *inventory.Addon {
	for i := range inv.Cluster.Addons {
		if inv.Cluster.Addons[i].Name == name {
			return &inv.Cluster.Addons[i]
		}
	}
	return nil
}

func sourceOf(d *charts.Desired) string {
	if d.Chart != nil {
		return "chart " + d.Chart.Metadata.Name + "@" + d.Chart.Metadata.Version
	}
	return fmt.Sprintf("manifests, %d objects", len(d.Set.Objects))
}

// sayChange reports one planned change as progress: in a dry run what would happen (the summary then
// gives the diffs), in a run what is about to happen.
func (u *upRun) sayChange(step string, ch charts.Change) {
	verb := ch.Action
	if u.o.DryRun {
		verb = "would " + ch.Action
	}
	u.e.say(step, "", "%s", ch.Line(verb))
}

// sayWouldInstall is a dry run's word on a cluster that cannot be asked yet: every add-on pick chooses
// would be installed.
func (u *upRun) sayWouldInstall(step string, desired []*charts.Desired, pick func(*inventory.Addon) bool) {
	for _, d := range desired {
		if pick(d.Addon) {
			u.e.say(step, "", "would install add-on %s (%s) in %s", d.Addon.Name, sourceOf(d), d.Addon.NamespaceOrDefault())
		}
	}
}

// Addons lists the add-ons clusterctl installed in the cluster: its Helm releases and manifests records.
func Addons(ctx context.Context, e *Env) ([]charts.Release, error) {
	admin, err := e.Admin(ctx)
	if err != nil {
		return nil, err
	}
	return charts.NewClient(admin).List(ctx)
}
