package profile

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Select returns the profiles of the workspace at root to capture: each
// explicit directory (checked by Resolve) and, with discover, every
// profile Discover finds. A path given twice counts once; profiles nested
// in one another are refused.
func Select(root string, explicit []string, discover bool) ([]Profile, error) {
	byRel := map[string]Profile{}
	for _, d := range explicit {
		p, err := Resolve(root, d)
		if err != nil {
			return nil, err
		}
		byRel[p.Rel] = p
	}
	if discover {
		found, err := Discover(root)
		if err != nil {
			return nil, err
		}
		for _, p := range found {
			if _, ok := byRel[p.Rel]; !ok {
				byRel[p.Rel] = p
			}
		}
	}
	out := make([]Profile, 0, len(byRel))
	for _, p := range byRel {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rel < out[j].Rel })
	for i := 1; i < len(out); i++ {
		if strings.HasPrefix(out[i].Rel, out[i-1].Rel+"/") {
			return nil, fmt.Errorf("%w: profile %s lies inside profile %s; give one of them", ErrNotProfile, out[i].Dir, out[i-1].Dir)
		}
	}
	return out, nil
}

// PrepareAll runs Prepare on every profile, setting each one's State in
// ps, stops at the first error (a running browser above all), and returns
// all problems found. Capture each profile with its CaptureFilter.
func PrepareAll(ctx context.Context, ps []Profile) ([]Problem, error) {
	var probs []Problem
	for i := range ps {
		more, err := Prepare(ctx, &ps[i])
		probs = append(probs, more...)
		if err != nil {
			return probs, err
		}
	}
	return probs, nil
}
