package config

import (
	"fmt"
	"net"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Provider is a named provider instance: LocalProvider, SSHProvider,
// E2BProvider or ManagedAgentsProvider.
// A workspace's provider names one.
type Provider interface {
	// InstanceName is the name of the instance ([providers.NAME]).
	InstanceName() string
	// Type is its adapter: TypeLocal or TypeSSH.
	Type() string
}

// LocalProvider keeps instances as directories under Root on this host.
type LocalProvider struct {
	Name string
	Root string
}

// InstanceName implements Provider.
func (p LocalProvider) InstanceName() string { return p.Name }

// Type implements Provider.
func (p LocalProvider) Type() string { return TypeLocal }

// SSHProvider keeps instances as directories under Root on an SSH host.
// KeyFile and KnownHosts are checked to be readable files; the caller
// parses them.
type SSHProvider struct {
	Name       string
	Host       string
	Port       int
	User       string
	KeyFile    string // the client's private key (a secret)
	KnownHosts string // an OpenSSH known_hosts file holding the host's key
	Root       string // absolute directory on the host, not "/"
	CacheDir   string // local mirror directory; default <state.dir>/mirrors/<name>
}

// InstanceName implements Provider.
func (p SSHProvider) InstanceName() string { return p.Name }

// Type implements Provider.
func (p SSHProvider) Type() string { return TypeSSH }

// Addr is host:port, as ssh.Config.Addr takes it.
func (p SSHProvider) Addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) }

func tableHeader(top, name string) string {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "[" + top + "." + quote(name) + "]"
		}
	}
	return "[" + top + "." + name + "]"
}

func (d *decoder) providers(c *Config) {
	d.eachTable("providers", "provider instance name", func(name string, tpath []string) {
		r := d.reader(tpath, []spec{typeKey}, tableHeader("providers", name))
		typ := r.str("type")
		var keys []spec
		switch typ {
		case TypeLocal:
			r.keys = localKeys
			c.Providers = append(c.Providers, LocalProvider{Name: name, Root: r.str("root")})
		case TypeSSH:
			r.keys = sshKeys
			c.Providers = append(c.Providers, d.ssh(c, r, name))
		case TypeVercel, TypeDaytona, TypeCloudflare:
			r.keys = platformKeys(typ)
			c.Providers = append(c.Providers, d.platform(c, r, name, typ))
		case TypeDocker:
			r.keys = dockerKeys
			c.Providers = append(c.Providers, d.docker(c, r, name))
		case TypeE2B:
			r.keys = e2bKeys
			c.Providers = append(c.Providers, d.e2b(c, r, name))
		case TypeManagedAgents:
			r.keys = managedAgentsKeys
			c.Providers = append(c.Providers, d.managedAgents(c, r, name))
		case "":
			d.markUsed(tpath)
			return
		default:
			d.fail(r.src("type"), join(tpath, "type"), "unknown provider type %q; known types: %s", typ, strings.Join(providerTypes, ", "))
			d.markUsed(tpath)
			return
		}
		keys = r.keys
		d.unknownUnder(tpath, func(k string) string { return unknownKeyMsg(k, tpath, fmt.Sprintf("a %s provider", typ), keys) })
	})
}

func (d *decoder) ssh(c *Config, r *reader, name string) SSHProvider {
	p := SSHProvider{
		Name:       name,
		Host:       r.str("host"),
		Port:       r.int("port"),
		User:       r.str("user"),
		KeyFile:    r.str("key_file"),
		KnownHosts: r.str("known_hosts"),
		Root:       r.str("root"),
		CacheDir:   r.str("cache_dir"),
	}
	if h := p.Host; h != "" && strings.Contains(h, ":") && net.ParseIP(h) == nil {
		d.fail(r.src("host"), join(r.path, "host"), "host %q holds a port or is not an address: give the host alone and the port in port", h)
	}
	if p.Root != "" && (!path.IsAbs(p.Root) || path.Clean(p.Root) == "/") {
		d.fail(r.src("root"), join(r.path, "root"), "root %q must be an absolute directory on the host other than /", p.Root)
	}
	if p.Root != "" {
		p.Root = path.Clean(p.Root)
	}
	if p.CacheDir == "" && c.State.Dir != "" {
		p.CacheDir = filepath.Join(c.State.Dir, "mirrors", name)
		r.line("cache_dir").val = quote(p.CacheDir)
	}
	return p
}
