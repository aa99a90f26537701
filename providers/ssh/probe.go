package ssh

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers"
)

// hostSupport is what one probe found on the host (and in the local
// mirror directory). It is kept for the provider's life once found.
type hostSupport struct {
	tar       bool // GNU tar with --xattrs: WriteFiles streams a tar into it
	find      bool // GNU find (-printf): the mirror finds hard links
	getfattr  bool // getfattr (Debian's attr): the mirror reads xattrs
	xattrs    bool // the root's filesystem takes user.* xattrs, written by tar and read back by getfattr
	fifos     bool // a fifo extracted by tar is a fifo
	links     bool // the root's filesystem takes hard links
	root      bool // the SSH user is uid 0: tar keeps owners
	syncF     bool // sync -f (coreutils 8.24+): syncfs of the staging tree
	sftpLinks bool // the SFTP server offers hardlink@openssh.com
	localX    bool // the local mirror directory takes user.* xattrs
	localRoot bool // Lifeboat runs as root: the mirror keeps owners
}

// support is what WriteFiles keeps and ReadFiles shows, given hs.
func (hs hostSupport) support() providers.FileSupport {
	return providers.FileSupport{
		HardLinks: hs.links && hs.find && (hs.tar || hs.sftpLinks),
		Xattrs:    hs.tar && hs.xattrs && hs.getfattr && hs.localX,
		Fifos:     hs.tar && hs.fifos,
		Ownership: hs.tar && hs.root && hs.localRoot,
	}
}

// FileSupport implements providers.FileSupporter: what the host lets
// WriteFiles keep and ReadFiles show again, probed once (one SSH command
// that extracts a three-entry tar in a scratch directory under
// <root>/.lifeboat and looks at the result) and then kept:
//
//	HardLinks  GNU tar (or the SFTP server's hardlink@openssh.com), GNU find, a filesystem with links
//	Xattrs     GNU tar with --xattrs, getfattr (Debian's attr), user.* xattrs on the host's and the mirror's filesystems
//	Fifos      GNU tar
//	Ownership  GNU tar, the SSH user is root, and so is Lifeboat (the mirror keeps owners only then)
//	Sparse     never: holes are sent and written as zeros
func (p *Provider) FileSupport(ctx context.Context) (providers.FileSupport, error) {
	const op = "file support"
	c, err := p.dial(ctx, op, "")
	if err != nil {
		return providers.FileSupport{}, err
	}
	defer c.Close()
	hs, err := p.host(ctx, c, op, "")
	return hs.support(), err
}

// host returns the probe's result, probing over c the first time.
func (p *Provider) host(ctx context.Context, c *conn, op string, id providers.InstanceID) (hostSupport, error) {
	p.hsMu.Lock()
	defer p.hsMu.Unlock()
	if p.hs != nil {
		return *p.hs, nil
	}
	hs, err := p.probe(ctx, c, op, id)
	if err != nil {
		return hostSupport{}, err
	}
	if p.limitHost != nil {
		hs = p.limitHost(hs)
	}
	p.hs = &hs
	return hs, nil
}

// probeScript runs in a scratch directory under the root, with probeTar
// on stdin. An absent root is never created (an unmounted disk).
const probeScript = `root=%s
[ -d "$root" ] || { echo "root $root does not exist" >&2; exit 12; }
mkdir -p "$root/.lifeboat" && d=$(mktemp -d "$root/.lifeboat/probe.XXXXXXXX") || exit 10
trap 'rm -rf "$d"' EXIT
cd "$d" || exit 11
echo "uid=$(id -u)"
if tar --version 2>/dev/null | sed -n 1p | grep -q 'GNU tar' && tar --xattrs --xattrs-include='user.*' -c -f /dev/null -T /dev/null 2>/dev/null; then
	echo tar=1
	tar -x -f - -p --numeric-owner --xattrs --xattrs-include='user.*' 2>/dev/null
else
	cat >/dev/null
	printf 1 >f && ln f g 2>/dev/null
fi
[ -p p ] && echo fifo=1
[ -f f ] && [ f -ef g ] && echo link=1
find . -maxdepth 0 -printf '' >/dev/null 2>&1 && echo find=1
if command -v getfattr >/dev/null 2>&1; then
	echo getfattr=1
	[ "$(getfattr --only-values -n user.lifeboat.probe f 2>/dev/null)" = 1 ] && echo xattr=1
fi
sync -f . >/dev/null 2>&1 && echo syncf=1
exit 0
`

func (p *Provider) probe(ctx context.Context, c *conn, op string, id providers.InstanceID) (hostSupport, error) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	mt := time.Unix(1, 0)
	for _, h := range []*tar.Header{
		{Name: "f", Typeflag: tar.TypeReg, Mode: 0o600, Size: 1, ModTime: mt, Format: tar.FormatPAX,
			PAXRecords: map[string]string{"SCHILY.xattr.user.lifeboat.probe": "1"}},
		{Name: "g", Typeflag: tar.TypeLink, Linkname: "f", ModTime: mt, Format: tar.FormatPAX},
		{Name: "p", Typeflag: tar.TypeFifo, Mode: 0o600, ModTime: mt, Format: tar.FormatPAX},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return hostSupport{}, err
		}
		if h.Size > 0 {
			_, _ = tw.Write([]byte("1"))
		}
	}
	if err := tw.Close(); err != nil {
		return hostSupport{}, err
	}
	var out bytes.Buffer
	exit, stderr, err := c.run(ctx, fmt.Sprintf(probeScript, shQuote(p.cfg.Root)), &in, &out)
	if err != nil {
		return hostSupport{}, wrap(op, id, fmt.Errorf("probing %s: %w", p.cfg.Addr, err))
	}
	switch {
	case exit == 12:
		return hostSupport{}, newErr(op, id, providers.KindUnavailable, "root %s does not exist on %s (check that it is mounted)", p.cfg.Root, p.cfg.Addr)
	case exit != 0 && deniedPath(stderr) != "":
		return hostSupport{}, newErr(op, id, providers.KindPermission, "cannot make a scratch directory in %s on %s: %s; fix the permissions there (retrying will not help)",
			path.Join(p.cfg.Root, metaDir), p.cfg.Addr, firstLine(stderr))
	case exit != 0:
		return hostSupport{}, newErr(op, id, providers.KindUnavailable, "probing %s failed (exit %d): %s", p.cfg.Addr, exit, firstLine(stderr))
	}
	var hs hostSupport
	// flags: the probe script's "name=1" lines.
	flags := map[string]*bool{"tar": &hs.tar, "fifo": &hs.fifos, "link": &hs.links, "find": &hs.find,
		"getfattr": &hs.getfattr, "xattr": &hs.xattrs, "syncf": &hs.syncF}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		if k == "uid" {
			hs.root = v == "0"
		} else if f, ok := flags[k]; ok {
			*f = v == "1"
		}
	}
	_, hs.sftpLinks = c.sftp.HasExtension("hardlink@openssh.com")
	hs.localX = p.localXattrs()
	hs.localRoot = os.Geteuid() == 0
	return hs, nil
}

// localXattrs reports whether the mirror directory takes user.* xattrs.
func (p *Provider) localXattrs() bool {
	if err := os.MkdirAll(p.cfg.CacheDir, 0o700); err != nil {
		return false
	}
	f, err := os.CreateTemp(p.cfg.CacheDir, ".xattr-probe-")
	if err != nil {
		return false
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return unix.Fsetxattr(int(f.Fd()), "user.lifeboat.probe", []byte("1"), 0) == nil
}
