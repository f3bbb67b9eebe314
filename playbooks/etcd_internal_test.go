package playbooks

import (
	"testing"
	"time"
)

// A restore resumes only with the same snapshot onto the same members: every member of one new cluster
// must share its token, and a member restored for another member set must be restored again.
func TestOpenRestoreJournal(t *testing.T) {
	dir := t.TempDir()
	key := "sum1 cp1=https://10.0.0.1:2380"
	first, err := openRestoreJournal(dir, key, time.Now())
	if err != nil || first.Data.Token == "" || len(first.Done) != 0 {
		t.Fatalf("a new restore: %+v, %v", first, err)
	}
	if err := first.MarkDone("restore/cp1"); err != nil {
		t.Fatal(err)
	}
	again, err := openRestoreJournal(dir, key, time.Now())
	if err != nil || again.Data.Token != first.Data.Token || !again.IsDone("restore/cp1") {
		t.Errorf("the same restore again: %+v, %v; want it resumed", again, err)
	}
	for _, other := range []string{"sum2 cp1=https://10.0.0.1:2380", "sum1 cp1=https://10.0.0.1:2380,cp2=https://10.0.0.2:2380"} {
		j, err := openRestoreJournal(dir, other, time.Now())
		if err != nil || j.Data.Token == first.Data.Token || len(j.Done) != 0 || j.Key != other {
			t.Errorf("%s: %+v, %v; want a new restore", other, j, err)
		}
	}
}
