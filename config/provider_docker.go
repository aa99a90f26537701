package config

import (
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// TypeDocker is the provider type of Docker containers.
const TypeDocker = "docker"

var dockerKeys = []spec{
	typeKey,
	{name: "host", kind: kString, def: "unix:///var/run/docker.sock"},
	{name: "tls_ca", kind: kFile},
	{name: "tls_cert", kind: kFile},
	{name: "tls_key", kind: kFile, secret: true},
	{name: "image", kind: kString, required: true},
	{name: "command", kind: kList, defNote: "the image's command"},
	{name: "workdir", kind: kString, def: "/workspace"},
	{name: "mounts", kind: kList},
	{name: "labels", kind: kList},
	{name: "network", kind: kString, defNote: "the daemon's default"},
	{name: "checkpoint_repository", kind: kString, def: "lifeboat-checkpoint"},
	{name: "cache_dir", kind: kString, defNote: "<state.dir>/mirrors/<name>"},
}

// DockerProvider keeps instances as containers of one Docker daemon.
// The TLS files are checked to be readable; the caller loads them.
type DockerProvider struct {
	Name                 string
	Host                 string // unix:///path or tcp://host:port
	TLSCA, TLSCert       string
	TLSKey               string // a secret
	Image                string
	Command              []string
	Workdir              string
	Mounts               []string          // SRC:DST[:ro|rw]
	Labels               map[string]string // from "key=value" entries
	Network              string
	CheckpointRepository string
	CacheDir             string
}

// InstanceName implements Provider.
func (p DockerProvider) InstanceName() string { return p.Name }

// Type implements Provider.
func (p DockerProvider) Type() string { return TypeDocker }

func (d *decoder) docker(c *Config, r *reader, name string) DockerProvider {
	p := DockerProvider{
		Name: name, Host: r.str("host"), TLSCA: r.str("tls_ca"), TLSCert: r.str("tls_cert"), TLSKey: r.str("tls_key"),
		Image: r.str("image"), Command: r.list("command"), Workdir: r.str("workdir"), Mounts: r.list("mounts"),
		Network: r.str("network"), CheckpointRepository: r.str("checkpoint_repository"), CacheDir: r.str("cache_dir"),
	}
	bad := func(key, format string, args ...any) { d.fail(r.src(key), join(r.path, key), format, args...) }
	u, err := url.Parse(p.Host)
	tls := p.TLSCA != "" || p.TLSCert != "" || p.TLSKey != ""
	switch {
	case err != nil || (u.Scheme != "unix" && u.Scheme != "tcp"):
		bad("host", "host %q is not a Docker daemon address: want unix:///path/to/docker.sock or tcp://host:port", p.Host)
	case u.Scheme == "unix" && u.Path == "":
		bad("host", "host %q names no socket path", p.Host)
	case u.Scheme == "tcp" && (p.TLSCA == "" || p.TLSCert == "" || p.TLSKey == ""):
		bad("host", "host %q is tcp: set tls_ca, tls_cert and tls_key (a daemon reached over TCP without TLS gives root to anyone on the network)", p.Host)
	case u.Scheme == "unix" && tls:
		bad("host", "tls_ca, tls_cert and tls_key are for a tcp:// host; %q is a unix socket", p.Host)
	}
	if w := p.Workdir; !path.IsAbs(w) || path.Clean(w) == "/" || strings.HasPrefix(path.Clean(w), "/.lifeboat") {
		bad("workdir", "workdir %q must be an absolute directory inside the container other than / and outside /.lifeboat", w)
	} else {
		p.Workdir = path.Clean(w)
	}
	for _, m := range p.Mounts {
		parts := strings.Split(m, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !path.IsAbs(parts[1]) || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			bad("mounts", "mount %q: want SOURCE:/container/path or SOURCE:/container/path:ro", m)
		}
	}
	labels := r.list("labels")
	if len(labels) > 0 {
		p.Labels = map[string]string{}
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.HasPrefix(k, "lifeboat.") {
			bad("labels", "label %q: want key=value, with a key not starting with lifeboat. (Lifeboat's own labels)", l)
			continue
		}
		p.Labels[k] = v
	}
	if p.CacheDir == "" && c.State.Dir != "" {
		p.CacheDir = filepath.Join(c.State.Dir, "mirrors", name)
		r.line("cache_dir").val = quote(p.CacheDir)
	}
	return p
}
