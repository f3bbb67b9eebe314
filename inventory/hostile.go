package inventory

import (
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"unicode"
)

// Every value of an inventory reaches a host one way or another: a file clusterctl writes, a flag of a
// component, an argument of a command. The checks here make sure none can change the shape of what it is
// put into; the per-field checks of validate.go say what each value is.

// controlChars reports every string of the inventory, at any depth, that holds a control character (a
// newline starts a new line of a flags file or a unit; a NUL ends a C string early).
func (v *validator) controlChars() {
	var walk func(key string, rv reflect.Value)
	walk = func(key string, rv reflect.Value) {
		switch rv.Kind() {
		case reflect.String:
			if strings.HasSuffix(key, ".run") && strings.Contains(key, "hooks.") {
				// A hook is a shell script of its author's: lines and tabs are its own.
				if r, ok := controlChar(strings.NewReplacer("\n", "", "\t", "").Replace(rv.String())); ok {
					v.errorf(key, "%q holds the control character %U; a hook may hold newlines and tabs, nothing else", rv.String(), r)
				}
				return
			}
			if r, ok := controlChar(rv.String()); ok {
				v.errorf(key, "%q holds the control character %U; no value may", rv.String(), r)
			}
		case reflect.Pointer:
			if !rv.IsNil() {
				walk(key, rv.Elem())
			}
		case reflect.Slice:
			if args, ok := rv.Interface().(Args); ok {
				for _, a := range args {
					walk(key+"."+a.Name, reflect.ValueOf(a.Name))
					walk(key+"."+a.Name, reflect.ValueOf(a.Value))
				}
				return
			}
			for i := 0; i < rv.Len(); i++ {
				walk(fmt.Sprintf("%s[%d]", key, i), rv.Index(i))
			}
		case reflect.Map:
			iter := rv.MapRange()
			for iter.Next() {
				k := key + "." + iter.Key().String()
				walk(k, iter.Key())
				walk(k, iter.Value())
			}
		case reflect.Struct:
			t := rv.Type()
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if !f.IsExported() || name == "-" {
					continue
				}
				switch {
				case f.Anonymous:
					walk(key, rv.Field(i))
				case key == "":
					walk(name, rv.Field(i))
				default:
					walk(key+"."+name, rv.Field(i))
				}
			}
		}
	}
	walk("", reflect.ValueOf(v.inv).Elem())
}

func controlChar(s string) (rune, bool) {
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return r, true
		}
	}
	return 0, false
}

// userRE is what a login name on a Linux host may be (shadow-utils' rule, with upper case allowed).
var userRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)

func (v *validator) user(key, u string) {
	if u != "" && !userRE.MatchString(u) {
		v.errorf(key, "%q is not a user name (letters, digits, '_', '.' and '-', starting with a letter or '_', at most 32)", u)
	}
}

// Image repositories, as the distribution reference grammar has them: a registry (a DNS name or an address
// with an optional port) and optional path components.
var (
	domainPart   = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domain       = `(?:` + domainPart + `(?:\.` + domainPart + `)*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?`
	pathPart     = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	repositoryRE = regexp.MustCompile(`^` + domain + `(?:/` + pathPart + `)*$`)
)

// socketRE is a CRI endpoint: a Unix socket at a plain absolute path.
var socketRE = regexp.MustCompile(`^unix:///[A-Za-z0-9._+-]+(?:/[A-Za-z0-9._+-]+)*$`)

// kubeletFlagUnsafe are the characters a kubelet flag value may not hold: the flags go through
// kubeadm-flags.env (an EnvironmentFile, whose quoting rules use them) and systemd splits them on spaces.
const kubeletFlagUnsafe = " \t\"'\\$`;"

// checkIP returns "" for an IP address without a zone (an IPv6 zone may hold any character), else what is
// wrong with it.
func checkIP(s string) string {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return "is not an IP address"
	case a.Zone() != "":
		return "has an IPv6 zone (%...); give the address without it"
	}
	return ""
}
