package providers

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestWriteStarted(t *testing.T) {
	t.Parallel()
	WriteStarted(context.Background()) // nothing set: nothing happens
	var order []string
	outer := WithWriteStarted(context.Background(), func() { order = append(order, "outer") })
	inner := WithWriteStarted(outer, func() { order = append(order, "inner") })
	WriteStarted(inner)
	WriteStarted(inner)
	WriteStarted(outer)
	if fmt.Sprint(order) != "[outer inner outer inner outer]" {
		t.Fatalf("calls: %v", order)
	}
}

func TestPermissionKind(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("copy-back: %w", &Error{Provider: "local", Op: "write files", Kind: KindPermission, Code: "EACCES", Err: errors.New("cannot read a/b")})
	if !errors.Is(err, ErrPermission) || errors.Is(err, ErrUnauthorized) || KindOf(err) != KindPermission {
		t.Fatalf("KindPermission not matched: %v", err)
	}
}
