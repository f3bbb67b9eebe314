package facts

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Unsettled says why the host is not as the last run that stamped it left it, with the plan whose digest
// is given, "" when it is: its stamp has that digest, the files it lists are in the state they were in
// then (none rewritten, replaced, touched or removed since), and the kernel has its pod routes.
func (f *Facts) Unsettled(digest string) string {
	fields := strings.Fields(f.Stamp)
	switch {
	case f.Stamp == "":
		return "no stamp (a new host, or no run finished there since its last push)"
	case len(fields) != 4 || fields[0] != "v1":
		return "a stamp this clusterctl does not read"
	case digest == "" || fields[1] != digest:
		return "its stamp is of another plan"
	case fields[2] != f.StampFiles:
		return "a file its stamp lists changed since"
	case f.RoutesMissing != 0:
		return fmt.Sprintf("the kernel lacks %d of its pod routes", f.RoutesMissing)
	}
	return ""
}

// The marks around stat's output for the files a stamp lists, in the facts script's output.
const (
	stampStatBegin = "stamp_stat_begin"
	stampStatEnd   = "stamp_stat_end"
)

// stampState reads stat's output for the files a stamp lists, up to its end mark, and returns its digest as
// the host's stamp_hash takes it (templates/files/stamphash.sh: sha256sum of that output, its lines as
// they end in a newline), "" when the mark never came (cut short: not the state the stamp holds). A line
// ending in a carriage return loses it to the scanner: its digest differs, and the host is not settled,
// the safe way.
func stampState(sc *bufio.Scanner) string {
	h := sha256.New()
	for sc.Scan() {
		if sc.Text() == stampStatEnd {
			return hex.EncodeToString(h.Sum(nil))
		}
		h.Write(sc.Bytes())
		h.Write([]byte{'\n'})
	}
	return ""
}
