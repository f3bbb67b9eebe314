package transport

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// What a command and its keeper say to each other before SSH starts on their socket.

// KeeperLog is where the keeper listening on socket logs what it does.
func KeeperLog(socket string) string { return strings.TrimSuffix(socket, ".sock") + ".log" }

// keeperRequest is what a command asks of the keeper: a connection to Target, dialled with Options.
type keeperRequest struct {
	Target  Target
	Options keeperDialOptions
	Persist time.Duration // how long the keeper stays after the last client, from now on
	// Hold asks for nothing but the keeper's stay: the command that started it, dialling its hosts itself,
	// holds it until it ends, so that its Persist counts from then.
	Hold bool `json:",omitempty"`
}

// keeperDialOptions are the Options of the command's Dialer that decide a connection (the credentials
// asked for on a terminal stay with the command, which dials itself when they are needed).
type keeperDialOptions struct {
	ClusterKnownHosts string
	KnownHosts        []string
	AcceptNew         bool
	RecordTrusted     bool
	Agent             bool
	AgentSocket       string
	ConnectTimeout    time.Duration
	Keepalive         time.Duration
	Retries           int
	RetryDelay        time.Duration
	// AuthFinal: the command can ask for a password or passphrase, so an authentication failure is not
	// retried here; the command dials itself and asks.
	AuthFinal bool
}

// keeperAnswer is the keeper's answer: its SSH host key (the socket is what is trusted; the key only
// binds the SSH that follows to this answer), or why the host could not be reached.
type keeperAnswer struct {
	HostKey []byte     `json:",omitempty"`
	Err     *keeperErr `json:",omitempty"`
}

// keeperErr carries a dial error to the command, which makes it the error a dial of its own would have
// returned.
type keeperErr struct {
	Kind     string // "hostkey", "dial" or "other"
	Host     string
	Address  string
	Msg      string
	Offered  string   `json:",omitempty"`
	Expected []string `json:",omitempty"`
	Unknown  bool     `json:",omitempty"`
	Hint     string   `json:",omitempty"`
	Tries    int      `json:",omitempty"`
	Took     time.Duration
	Auth     bool `json:",omitempty"`
	Timeout  bool `json:",omitempty"`
}

func keeperErrOf(err error) *keeperErr {
	var hk *HostKeyError
	var de *DialError
	switch {
	case errors.As(err, &hk):
		return &keeperErr{Kind: "hostkey", Host: hk.Host, Address: hk.Address, Offered: hk.Offered, Expected: hk.Expected,
			Unknown: hk.Unknown, Hint: hk.Hint}
	case errors.As(err, &de):
		return &keeperErr{Kind: "dial", Host: de.Host, Address: de.Address, Msg: plainNetError(de.Err).Error(), Tries: de.Tries,
			Took: de.Took, Auth: errors.Is(err, ErrAuth), Timeout: errors.Is(err, os.ErrDeadlineExceeded)}
	}
	return &keeperErr{Kind: "other", Msg: err.Error()}
}

// err is the error the command returns.
func (e *keeperErr) err() error {
	switch e.Kind {
	case "hostkey":
		return &HostKeyError{Host: e.Host, Address: e.Address, Offered: e.Offered, Expected: e.Expected, Unknown: e.Unknown, Hint: e.Hint}
	case "dial":
		return &DialError{Host: e.Host, Address: e.Address, Err: &keptCause{msg: e.Msg, auth: e.Auth, timeout: e.Timeout},
			Tries: e.Tries, Took: e.Took}
	}
	return errors.New(e.Msg)
}

// keptCause is the cause of a dial error the keeper reported, in its words, still ErrAuth or a timeout
// when it was one.
type keptCause struct {
	msg           string
	auth, timeout bool
}

func (c *keptCause) Error() string { return c.msg }

func (c *keptCause) Is(target error) bool {
	return c.auth && target == ErrAuth || c.timeout && target == os.ErrDeadlineExceeded
}

// writeMessage and readMessage frame the request and the answer: a 4-byte length, then JSON.
func writeMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(b)), uint32(len(b)))
	_, err = w.Write(append(buf, b...))
	return err
}

func readMessage(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > keeperMaxMessage {
		return fmt.Errorf("a message of %d bytes (at most %d)", size, keeperMaxMessage)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
