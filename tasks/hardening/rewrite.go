package hardening

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// Rewrite has the API server store again each stale object of a resource: an update that changes nothing
// is written all the same when the object was read with another key than the write key, or in clear (the
// API server's storage calls such data stale), so the object ends up under the write key, as
// `kubectl replace` of every object does in the Kubernetes documentation. Objects deleted meanwhile are
// skipped; an object changed meanwhile is read again. It returns how many it rewrote.
func Rewrite(ctx context.Context, ri dynamic.NamespaceableResourceInterface, stale []Object) (int, error) {
	n := 0
	for _, o := range stale {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		var r dynamic.ResourceInterface = ri
		if o.Namespace != "" {
			r = ri.Namespace(o.Namespace)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := r.Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = r.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "clusterctl"})
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return n, fmt.Errorf("rewriting %s: %w", o, err)
		default:
			n++
		}
	}
	return n, nil
}
