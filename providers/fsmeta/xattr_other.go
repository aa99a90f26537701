//go:build !linux

package fsmeta

import (
	"errors"
	"strings"
)

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// User reports whether name is in the user namespace.
func User(name string) bool { return strings.HasPrefix(name, "user.") }

// All keeps every attribute.
func All(string) bool { return true }

// Outside Linux no attribute is read: the adapters report Xattrs false.

func FdXattrs(int, func(string) bool) ([]Xattr, error)   { return nil, nil }
func LXattrs(string, func(string) bool) ([]Xattr, error) { return nil, nil }
func Unsupported(err error) bool                         { return errors.Is(err, errors.ErrUnsupported) }
