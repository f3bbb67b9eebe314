package etcdmember

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// scanPage is how many keys one read of Scan takes: objects are up to 1.5 MiB each in etcd, so a page
// stays within the client's default 2 GiB receive limit by far, and within a few MiB for typical Secrets.
const scanPage = 200

// Scan calls fn with every key under prefix and its value, in key order, a page at a time, all pages at
// the first page's revision (one consistent view). fn's error ends the scan.
func (c *Client) Scan(ctx context.Context, prefix string, fn func(key, value []byte) error) error {
	if prefix == "" {
		return errors.New("scan: an empty prefix would read the whole store")
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	from, rev := prefix, int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(scanPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := c.c.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = r.Header.Revision
		}
		for _, kv := range r.Kvs {
			if err := fn(kv.Key, kv.Value); err != nil {
				return err
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			return nil
		}
		// The next page begins just after this one's last key.
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}
