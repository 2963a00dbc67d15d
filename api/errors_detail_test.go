package api

import (
	"errors"
	"fmt"
	"testing"
)

// Detail drops the words of the sentinel an error starts with, and only
// those: a message that merely names a sentinel's words elsewhere, or an
// error wrapping none, is given whole.
func TestDetail(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: pattern %q: bad", ErrInvalidArgument, "p"), `pattern "p": bad`},
		{fmt.Errorf("%w: shard 3 is splitting", ErrFailedPrecondition), "shard 3 is splitting"},
		{fmt.Errorf("%w: %w: nested", ErrUnavailable, ErrInvalidArgument), "api: invalid argument: nested"},
		{fmt.Errorf("pattern %q: %w", "p", ErrNotFound), `pattern "p": api: not found`},
		{errors.New("api: invalid argument: not wrapped"), "api: invalid argument: not wrapped"},
		{errors.New("plain"), "plain"},
	} {
		if got := Detail(c.err); got != c.want {
			t.Errorf("Detail(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
