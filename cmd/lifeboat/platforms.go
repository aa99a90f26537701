package main

import (
	"fmt"

	"lifeboat/config"
	"lifeboat/providers"
	"lifeboat/providers/cloudflare"
	"lifeboat/providers/daytona"
	"lifeboat/providers/vercel"
)

// platformProvider builds a vercel, daytona or cloudflare provider
// instance; its credential is read here and kept only in the adapter.
func platformProvider(c *config.Config, p config.PlatformProvider) (providers.Provider, error) {
	key, err := c.Secret(p.APIKey)
	if err != nil {
		return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
	}
	var pp providers.Provider
	switch p.Kind {
	case config.TypeVercel:
		pp, err = vercel.New(vercel.Config{Token: key, TeamID: p.TeamID, ProjectID: p.ProjectID, BaseURL: p.BaseURL,
			Runtime: p.Template, Workspace: p.Workspace, CacheDir: p.CacheDir, Timeout: p.Timeout, SandboxTimeout: p.SandboxTimeout})
	case config.TypeDaytona:
		pp, err = daytona.New(daytona.Config{APIKey: key, OrganizationID: p.OrganizationID, BaseURL: p.BaseURL,
			Snapshot: p.Template, Workspace: p.Workspace, CacheDir: p.CacheDir, Timeout: p.Timeout})
	case config.TypeCloudflare:
		pp, err = cloudflare.New(cloudflare.Config{Token: key, BaseURL: p.BaseURL, Workspace: p.Workspace, CacheDir: p.CacheDir, Timeout: p.Timeout})
	default:
		return nil, fmt.Errorf("provider %s: type %s is not supported by this lifeboat", p.Name, p.Kind)
	}
	if err != nil {
		return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
	}
	return pp, nil
}
