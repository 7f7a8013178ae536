# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Where a sandbox keeps its files, and how its processes are found.

A sandbox directory holds::

    ready.json          written once the sandbox is up (pid, mount ns, ...)
    resctrl/            the emulated resctrl, mounted in the host namespace
    emulator.pid        the process serving it
    emulator.sock       the emulator's control socket
    osrelease           the emulated kernel's release ([rdt]
                        kernel_release_file)
    log/                namespace.log, emulator.log
    ns/                 mount sources made inside the namespace
    private/etc/libvirt ... private/run/libvirt   libvirt's private dirs

Every process of a sandbox shares its mount namespace; the namespace's
inode, recorded in ``ready.json``, finds them all (also after a crash).
Inode numbers are reused once a namespace is gone, so a process counts only
if it also sees the sandbox's marker file, which exists on the sandbox's own
tmpfs and nowhere else.
"""

import json
import os
import signal
import time
import uuid

MARKER = '/sys/fs/rdt-virt-sandbox'

PRIVATE_DIRS = ('/etc/libvirt', '/var/lib/libvirt', '/var/cache/libvirt',
                '/var/log/libvirt', '/run/libvirt')


class Paths(object):
    """File layout of the sandbox directory ``base``.

    :param cache_dir: a directory kept across sandboxes for libvirt's QEMU
        capability cache (saves the 5-8 s probe); default: private.
    """

    def __init__(self, base, cache_dir=None):
        self.base = os.path.abspath(base)
        self.cache_dir = cache_dir and os.path.abspath(cache_dir)

    def ns(self, *parts):
        return os.path.join(self.base, 'ns', *parts)

    def log(self, name):
        os.makedirs(os.path.join(self.base, 'log'), exist_ok=True)
        return os.path.join(self.base, 'log', name)

    def private(self, target):
        if target == '/var/cache/libvirt' and self.cache_dir:
            return self.cache_dir
        return os.path.join(self.base, 'private', target.lstrip('/'))

    @property
    def control(self):
        return os.path.join(self.base, 'emulator.sock')

    @property
    def resctrl(self):
        return os.path.join(self.base, 'resctrl')

    @property
    def osrelease(self):
        return os.path.join(self.base, 'osrelease')

    @property
    def emulator_pid(self):
        return os.path.join(self.base, 'emulator.pid')

    @property
    def ready(self):
        return os.path.join(self.base, 'ready.json')

    @property
    def libvirt_socket(self):
        return os.path.join(self.private('/run/libvirt'), 'libvirt-sock')


def write_ready(paths, info):
    tmp = paths.ready + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(info, f)
    os.replace(tmp, paths.ready)


def read_ready(paths):
    try:
        with open(paths.ready) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def mntns(pid='self'):
    """Inode of the mount namespace of ``pid``, or None if it is gone."""
    try:
        return os.stat('/proc/%s/ns/mnt' % pid).st_ino
    except OSError:
        return None


def write_marker():
    """Mark the current namespace as a sandbox's; return the marker id."""
    ident = str(uuid.uuid4())
    with open(MARKER, 'w') as f:
        f.write(ident)
    return ident


def _marked(pid, ident):
    try:
        with open('/proc/%s/root%s' % (pid, MARKER)) as f:
            return f.read() == ident
    except OSError:
        return False


def namespace_pids(inode, ident):
    """Pids of the processes of one sandbox.

    :param inode: the sandbox's mount namespace inode.
    :param ident: the id in its marker file.
    """
    if inode is None or inode == mntns(1) or not ident:
        # Never the init namespace: that would be every process.
        return []
    return [int(name) for name in os.listdir('/proc')
            if name.isdigit() and mntns(name) == inode and
            _marked(name, ident)]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is gone for our purposes.
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def terminate(pids, timeout=10.0):
    """SIGTERM ``pids``, then SIGKILL what is left after ``timeout``."""
    pids = [p for p in pids if alive(p)]
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if alive(p)]
            time.sleep(0.05)
        if not pids:
            return
