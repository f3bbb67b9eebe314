package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrUntrusted marks a directory another user could change: the user's setup to fix, as a bad flag is
// (exit 2).
var ErrUntrusted = errors.New("untrusted directory")

// CheckPath refuses a directory that another user could change, or make clusterctl find another in its
// place: dir must be owned by the user, and every directory above it, up to /, as written and with every
// symbolic link resolved, owned by the user or root and writable by no group or other user unless it is
// sticky (/tmp: others may not rename what is not theirs). A symbolic link on the way must be the user's or
// root's. The mode of dir itself is its caller's to check (a state directory 0700, artifacts no group or
// other write). A missing dir is not checked (its caller makes it, then checks).
func CheckPath(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := checkChain(abs); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if real != abs {
		if err := checkChain(real); err != nil {
			return fmt.Errorf("%w (%s is %s)", err, dir, real)
		}
	}
	return nil
}

// checkChain checks abs and every directory above it, as their names say (without resolving the last
// component of each).
func checkChain(abs string) error {
	me := os.Geteuid()
	for p, leaf := abs, true; ; p, leaf = filepath.Dir(p), false {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		uid := -1
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			uid = int(sys.Uid)
		}
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			if uid != me && uid != 0 {
				return fmt.Errorf("%w: %s is a symbolic link owned by %s, who may point it elsewhere: refusing it (use the directory it points to)", ErrUntrusted, p, owner(uid))
			}
		case leaf && uid != me:
			return fmt.Errorf("%w: %s is owned by %s, not by you (%s): refusing it (use a directory of your own)", ErrUntrusted, p, owner(uid), owner(me))
		case !leaf && uid != me && uid != 0:
			return fmt.Errorf("%w: %s, above %s, is owned by %s, who may replace what is in it: refusing it (use a directory under one of yours)", ErrUntrusted, p, abs, owner(uid))
		case !leaf && st.Mode().Perm()&0o022 != 0 && st.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("%w: %s, above %s, has mode %04o: others may replace what is in it: refusing it (chmod go-w %s, or use another directory)", ErrUntrusted, p, abs, st.Mode().Perm(), p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// owner names a user by name and ID.
func owner(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("user %s (%d)", u.Username, uid)
	}
	return fmt.Sprintf("user %d", uid)
}
