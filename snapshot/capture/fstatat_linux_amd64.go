package capture

import "golang.org/x/sys/unix"

const capSysFstatat = unix.SYS_NEWFSTATAT
