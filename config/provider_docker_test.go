package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestDockerProvider: a docker instance over TCP with TLS is read with
// every key, its cache directory defaults under the state directory, and
// Show names the key file without printing it.
func TestDockerProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.mustLoad(f.write("lifeboat.toml", minimal+`
[providers.dock]
type = "docker"
host = "tcp://10.0.0.9:2376"
tls_ca = "{{dir}}/tls.crt"
tls_cert = "{{dir}}/tls.crt"
tls_key = "{{dir}}/tls.key"
image = "agent:1"
command = ["sleep", "infinity"]
mounts = ["/srv/cache:/cache:ro"]
labels = ["team=agents", "tier=2"]
network = "none"
`), nil)
	var got DockerProvider
	for _, p := range c.Providers {
		if d, ok := p.(DockerProvider); ok {
			got = d
		}
	}
	want := DockerProvider{Name: "dock", Host: "tcp://10.0.0.9:2376", TLSCA: f.dir + "/tls.crt", TLSCert: f.dir + "/tls.crt",
		TLSKey: f.dir + "/tls.key", Image: "agent:1", Command: []string{"sleep", "infinity"}, Workdir: "/workspace",
		Mounts: []string{"/srv/cache:/cache:ro"}, Labels: map[string]string{"team": "agents", "tier": "2"}, Network: "none",
		CheckpointRepository: "lifeboat-checkpoint", CacheDir: c.State.Dir + "/mirrors/dock"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("docker provider:\n%+v\nwant\n%+v", got, want)
	}
	out := show(t, c)
	if strings.Contains(out, "TLS PRIVATE KEY") || !strings.Contains(out, `tls_key = "`+f.dir+`/tls.key"`) {
		t.Fatalf("Show of the docker provider:\n%s", out)
	}
}
