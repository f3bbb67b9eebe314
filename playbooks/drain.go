package playbooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// This file holds the drain window every command that takes nodes out of service shares (upgrade,
// reboot, remove-node): cordon, drain with PodDisruptionBudgets respected, and, for the commands that
// give the nodes back, uncordon only what the command cordoned, as its journal recorded.

// drainNode evicts the node's Pods but DaemonSet and static ones, retrying evictions a PodDisruptionBudget
// refuses, until none is left or the timeout passes (see nodes.DrainRound).
func (e *Env) drainNode(ctx context.Context, kube kubernetes.Interface, play string, h *inventory.Host, timeout time.Duration) error {
	return e.poll(ctx, play, h.Name, timeout, func() (bool, string, error) {
		left, err := nodes.DrainRound(ctx, kube, h.NodeName)
		return len(left) == 0, "Pods still on the node: " + strings.Join(left, ", "), err
	})
}

// cordons is where a run keeps the nodes it cordoned, so that it (or the run that resumes it) uncordons
// those and leaves a node cordoned before it as it was.
type cordons interface {
	add(node string) error
	remove(node string) error
	has(node string) bool
}

// journalCordons keeps them in a run's journal, in the list of its data that list returns; a nil journal
// (a dry run) keeps nothing.
type journalCordons[T any] struct {
	st   *statedir.Journal[T]
	list func(*T) *[]string
}

func (c journalCordons[T]) add(node string) error {
	if c.st == nil {
		return nil
	}
	return c.st.Update(func(j *statedir.Journal[T]) { l := c.list(&j.Data); *l = append(*l, node) })
}

func (c journalCordons[T]) remove(node string) error {
	if c.st == nil {
		return nil
	}
	return c.st.Update(func(j *statedir.Journal[T]) {
		l := c.list(&j.Data)
		*l = slices.DeleteFunc(*l, func(n string) bool { return n == node })
	})
}

func (c journalCordons[T]) has(node string) bool {
	var ours bool
	if c.st != nil {
		c.st.View(func(j *statedir.Journal[T]) { ours = slices.Contains(*c.list(&j.Data), node) })
	}
	return ours
}

// drainWindow is a run's drain window: the play its messages name, each node's drain timeout, and where
// it keeps what it cordoned.
type drainWindow struct {
	e       *Env
	play    string
	timeout time.Duration
	ours    cordons
}

// open cordons the hosts' nodes (recording those it cordoned), then drains them one after the other. A
// drain that does not end is the run's error: the node stays cordoned, the rest of the cluster serves.
func (w drainWindow) open(ctx context.Context, kube kubernetes.Interface, hosts []*inventory.Host) error {
	for _, h := range hosts {
		n, err := kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		cordoned, err := nodes.Cordon(ctx, kube, n)
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if cordoned {
			w.e.say(w.play, h.Name, "cordoned")
			if err := w.ours.add(h.NodeName); err != nil {
				return err
			}
		}
	}
	for _, h := range hosts {
		if err := w.e.drainNode(ctx, kube, w.play, h, w.timeout); err != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("%s: drain: %w (a PodDisruptionBudget may forbid an eviction; the node stays cordoned, the cluster serves; the same command resumes)", h.Name, err)
		}
		w.e.say(w.play, h.Name, "drained")
	}
	return nil
}

// close makes a host's node schedulable again if the run cordoned it (a node cordoned before is left so).
func (w drainWindow) close(ctx context.Context, kube kubernetes.Interface, h *inventory.Host) error {
	if !w.ours.has(h.NodeName) {
		return nil
	}
	changed, err := nodes.Uncordon(ctx, kube, h.NodeName)
	if err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if changed {
		w.e.say(w.play, h.Name, "uncordoned")
	}
	return w.ours.remove(h.NodeName)
}

// hookWords is how a plan names the hooks of command a node runs inside its drain window at when ("" for
// none).
func hookWords(inv *inventory.Inventory, h *inventory.Host, command, when string) string {
	var w string
	for _, hk := range inv.HooksFor(h, command, when) {
		w += fmt.Sprintf("hook %s.%s %q, ", command, when, hk.Run)
	}
	return w
}
