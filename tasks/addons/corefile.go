package addons

import (
	"fmt"
	"strings"

	"github.com/coredns/corefile-migration/migration"
)

// MigrateCorefile carries a cluster's Corefile from one CoreDNS version to another as kubeadm upgrade does
// (github.com/coredns/corefile-migration): plugins removed or renamed between them are rewritten, what the
// user added is kept. It returns the Corefile to apply and notes on what changed or could not be carried
// (then the current Corefile is kept as it is: CoreDNS either accepts it or its rollout stops the upgrade).
func MigrateCorefile(from, to, corefile string) (string, []string) {
	from, to = strings.TrimPrefix(from, "v"), strings.TrimPrefix(to, "v")
	if from == to || corefile == "" {
		return corefile, nil
	}
	if err := migration.ValidUpMigration(from, to); err != nil {
		return corefile, []string{fmt.Sprintf("Corefile kept as it is: no migration from CoreDNS %s to %s is known (%v)", from, to, err)}
	}
	var notes []string
	if deprecated, err := migration.Deprecated(from, to, corefile); err == nil {
		for _, n := range deprecated {
			notes = append(notes, "Corefile: "+n.ToString())
		}
	}
	migrated, err := migration.Migrate(from, to, corefile, false)
	if err != nil {
		return corefile, append(notes, fmt.Sprintf("Corefile kept as it is: migrating it from CoreDNS %s to %s failed: %v", from, to, err))
	}
	return migrated, notes
}
